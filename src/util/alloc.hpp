#pragma once
// Allocator settings for the training loop.
//
// Every step LibTorch allocates and frees the same activations (hundreds of
// MB across a ViT's blocks). With glibc's defaults the heap top is trimmed
// back to the kernel whenever more than trim_threshold bytes lie free there
// (and large blocks are mmap'ed and unmapped), so the next step faults every
// page in again and the kernel zeroes it: 749k page faults in a 30-step
// distillation on one rank, 87k with the settings below
// (experiments/performance-log.md). keep_freed_memory() makes freed memory stay in
// the process: blocks up to 32 MiB (glibc's largest mmap threshold) come
// from the heap, and the heap is never trimmed. The process then keeps its
// peak footprint until it exits, which a batch job does anyway.
namespace vitkd {

/// Applies the settings above (glibc only; elsewhere it does nothing), unless
/// the user set GLIBC_TUNABLES or MALLOC_* variables, which then win.
/// Returns whether it changed anything.
bool keep_freed_memory();

}  // namespace vitkd
