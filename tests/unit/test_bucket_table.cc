// The host side of _loom_bucket's multi-tensor GPU kernel (ops/update/bucket_table.h): the
// prefix offsets of the tensors and the lookup every GPU thread runs to find the tensor of a
// concatenated element, checked for every element index against a naive linear search,
// with empty tensors at the start, in the middle and at the end.
#include <gtest/gtest.h>

#include <vector>

#include "ops/update/bucket_table.h"

namespace loom {
namespace {

// The tensor of element e by walking the sizes (independent of the offsets and the search).
int64_t naive_owner(const std::vector<int64_t>& sizes, int64_t e) {
  for (size_t t = 0; t < sizes.size(); ++t) {
    if (e < sizes[t]) return static_cast<int64_t>(t);
    e -= sizes[t];
  }
  return -1;
}

TEST(BucketTable, OffsetsArePrefixSums) {
  const std::vector<int64_t> sizes = {3, 0, 5, 1};
  EXPECT_EQ(update::bucket_offsets(sizes), (std::vector<int64_t>{0, 3, 3, 8, 9}));
  EXPECT_EQ(update::bucket_offsets(std::vector<int64_t>{}), (std::vector<int64_t>{0}));
  EXPECT_THROW(update::bucket_offsets(std::vector<int64_t>{2, -1}), std::invalid_argument);
}

TEST(BucketTable, FindMatchesNaiveSearchForEveryElement) {
  const std::vector<std::vector<int64_t>> cases = {
      {1},          {7},           {0, 4},          {4, 0},          {0, 0, 3, 0, 0},
      {1, 1, 1, 1}, {2, 0, 0, 5},  {12, 40000, 20}, {0, 1, 0, 2, 0, 3, 0},
      {5, 3, 0, 0, 0, 1, 9, 2, 6}};
  for (const auto& sizes : cases) {
    const std::vector<int64_t> off = update::bucket_offsets(sizes);
    const int64_t n = static_cast<int64_t>(sizes.size());
    for (int64_t e = 0; e < off.back(); ++e) {
      const int64_t t = update::bucket_find(off.data(), n, e);
      ASSERT_EQ(t, naive_owner(sizes, e))
          << "element " << e << " of " << sizes.size() << " tensors";
      ASSERT_GT(sizes[t], 0);
      ASSERT_LE(off[t], e);
      ASSERT_LT(e, off[t + 1]);
    }
  }
}

TEST(BucketTable, FindOnManyTensors) {
  std::vector<int64_t> sizes;
  for (int i = 0; i < 300; ++i) sizes.push_back(i % 7 == 3 ? 0 : (i * 37) % 11 + 1);
  const std::vector<int64_t> off = update::bucket_offsets(sizes);
  for (int64_t e = 0; e < off.back(); ++e)
    ASSERT_EQ(update::bucket_find(off.data(), static_cast<int64_t>(sizes.size()), e),
              naive_owner(sizes, e))
        << "element " << e;
}

}  // namespace
}  // namespace loom
