#pragma once
// One binary for every x86-64 node: GCC compiles a function marked
// VITKD_CLONES for AVX-512, AVX2 and baseline x86-64 and picks one at load
// time (the hand-vectorised kernels: model/gelu.cpp, model/softmax.cpp, model/mixed_add.cpp).
// Elsewhere (other compilers, other CPUs, sanitizer builds) it is empty.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && \
    !defined(__SANITIZE_ADDRESS__)
#define VITKD_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VITKD_CLONES
#endif
