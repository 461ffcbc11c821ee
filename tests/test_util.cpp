#include <gtest/gtest.h>

#include <cstdlib>
#include <vector>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "util/alloc.hpp"

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
TEST(Allocator, FreedActivationSizedBlocksStayInTheProcess) {
  if (std::getenv("GLIBC_TUNABLES") != nullptr) GTEST_SKIP() << "GLIBC_TUNABLES set: the user's settings win";
  ASSERT_TRUE(vitkd::keep_freed_memory());
  // 16 blocks of 4 MiB, the size of a ViT's MLP activations: with glibc's
  // defaults the first ones are mmap'ed and unmapped on free. With
  // keep_freed_memory() they come from the heap, and after they are all
  // freed the heap keeps them (no trim), ready for the next step.
  constexpr size_t kBlock = 4u << 20, kCount = 16;
  const size_t mapped_before = mallinfo2().hblkhd;
  std::vector<char*> blocks;
  for (size_t i = 0; i < kCount; ++i) {
    blocks.push_back(static_cast<char*>(std::malloc(kBlock)));
    ASSERT_NE(blocks.back(), nullptr);
    blocks.back()[0] = static_cast<char>(i);  // touch it
  }
  EXPECT_EQ(mallinfo2().hblkhd, mapped_before) << "blocks were mmap'ed";
  for (char* b : blocks) std::free(b);
  const struct mallinfo2 after = mallinfo2();
  EXPECT_GE(after.arena, kBlock * kCount) << "the heap was trimmed";
  EXPECT_GE(after.fordblks, kBlock * kCount) << "the freed blocks left the process";
}
#endif
