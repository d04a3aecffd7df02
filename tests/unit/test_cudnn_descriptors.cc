// The host side of the cuDNN layer (runtime/cuda/cudnn_graph.h) without a GPU: libcudnn
// loads, and the tensor, convolution and operation descriptors the convolution kernels
// build finalise (cuDNN checks their attribute types, ranks and sizes there). Operation
// graphs and plans need a device handle: only gpu_op_sweep runs those.
#include <gtest/gtest.h>

#include <iostream>

#ifdef LOOM_HAVE_CUDA
#include "runtime/cuda/cudnn_graph.h"
#endif

namespace loom {
namespace {

#ifdef LOOM_HAVE_CUDA
using cuda::dnn::ConvPass;
using cuda::dnn::Desc;

// Descriptors of a convolution; skips the test when this machine has no cuDNN 9 to load.
bool make_descs(const std::vector<int64_t>& x, const std::vector<int64_t>& w,
                const std::vector<int64_t>& y, const std::vector<int64_t>& pre,
                const std::vector<int64_t>& post, const std::vector<int64_t>& stride,
                const std::vector<int64_t>& dilate, std::vector<Desc>& out) {
  out.push_back(cuda::dnn::tensor(1, x, "test"));
  out.push_back(cuda::dnn::tensor(2, w, "test"));
  out.push_back(cuda::dnn::tensor(3, y, "test"));
  out.push_back(cuda::dnn::convolution(pre, post, stride, dilate, "test"));
  return true;
}

bool have_cudnn() {
  try {
    Desc probe(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "probe");
    return true;
  } catch (const Error& e) {
    std::cout << "no cuDNN to load: " << e.what() << "\n";
    return false;
  }
}

TEST(CudnnDescriptors, ConvolutionOperationsFinalise) {
  if (!have_cudnn()) GTEST_SKIP() << "libcudnn.so.9 not loadable here";
  // 2-D grouped, strided, dilated: x (2, 4, 7, 8), w (6, 2, 3, 2), groups 2, stride (2, 1),
  // dilation (1, 2), pad (1, 0): y (2, 6, 4, 6).
  std::vector<Desc> d;
  make_descs({2, 4, 7, 8}, {6, 2, 3, 2}, {2, 6, 4, 6}, {1, 0}, {1, 0}, {2, 1}, {1, 2}, d);
  for (ConvPass p : {ConvPass::kForward, ConvPass::kBackwardData, ConvPass::kBackwardFilter})
    for (float beta : {0.f, 1.f}) {
      Desc op = cuda::dnn::conv_operation(p, d[0], d[1], d[2], d[3], beta, "test");
      EXPECT_FALSE(op.empty());
    }
  // Tensors promised 16-byte aligned pointers (the plans for aligned arrays).
  Desc x16 = cuda::dnn::tensor(1, {2, 4, 7, 8}, "test", 16);
  Desc w16 = cuda::dnn::tensor(2, {6, 2, 3, 2}, "test", 16);
  Desc y16 = cuda::dnn::tensor(3, {2, 6, 4, 6}, "test", 16);
  EXPECT_FALSE(
      cuda::dnn::conv_operation(ConvPass::kForward, x16, w16, y16, d[3], 1.f, "test").empty());
  // 3-D with asymmetric padding (Deconvolution's post-pad): x (1, 2, 5, 6, 7), w (3, 2, 2, 3, 3),
  // pre (1, 1, 1), post (0, 1, 0), stride 2: y (1, 3, 3, 3, 3).
  std::vector<Desc> e;
  make_descs({1, 2, 5, 6, 7}, {3, 2, 2, 3, 3}, {1, 3, 3, 3, 3}, {1, 1, 1}, {0, 1, 0}, {2, 2, 2},
             {1, 1, 1}, e);
  Desc op = cuda::dnn::conv_operation(ConvPass::kBackwardData, e[0], e[1], e[2], e[3], 0.f, "t");
  EXPECT_FALSE(op.empty());
}

TEST(CudnnDescriptors, InconsistentShapesAreAClearError) {
  if (!have_cudnn()) GTEST_SKIP() << "libcudnn.so.9 not loadable here";
  // y's spatial size does not follow from x, w and the convolution: cuDNN refuses the
  // operation at finalisation, and the error names the caller and cuDNN's status.
  std::vector<Desc> d;
  make_descs({1, 3, 8, 8}, {4, 3, 3, 3}, {1, 4, 5, 5}, {0, 0}, {0, 0}, {1, 1}, {1, 1}, d);
  try {
    cuda::dnn::conv_operation(ConvPass::kForward, d[0], d[1], d[2], d[3], 0.f,
                              "Convolution node 'c1'");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("Convolution node 'c1'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("cuDNN error"), std::string::npos) << msg;
    EXPECT_NE(msg.find("CUDNN_STATUS"), std::string::npos) << msg;
  }
}
#endif

}  // namespace
}  // namespace loom
