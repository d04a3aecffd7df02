// Op-sweep references of the sharded optimizer's ops (ops/update/shard.cc). The sweep runs in
// a job of one rank, where the padded buffer is the plain concatenation of the tensors and the
// own range is all of it; the formulas are written out from the ops' headers (sgd_mom_update,
// lamb_update_phase2) in double. The 2-rank behaviour is tests/dist/dist_shard_opt.py.
#include <gtest/gtest.h>

#include <cmath>

#include "ops/float_tuple.h"
#include "ops/param.h"
#include "tests/unit/op_reference.h"

namespace loom {
namespace {

size_t tensors(const test::RefCall& c) {
  return static_cast<size_t>(parse_int(c.attrs.dict.at("num_tensors")));
}

LOOM_OP_REFERENCE("_loom_shard_reduce_scatter", [](const test::RefCall& c) {
  NDArray y(c.out_shapes[0]);
  int64_t j = 0;
  for (const NDArray& x : c.in)
    for (int64_t i = 0; i < x.size(); ++i) y.data<float>()[j++] = static_cast<float>(x.at(i));
  return std::vector<NDArray>{y};
});

LOOM_OP_REFERENCE("_loom_shard_all_gather", [](const test::RefCall& c) {
  const size_t n = tensors(c);
  std::vector<NDArray> out;
  int64_t j = 0;
  for (size_t t = 0; t < n; ++t) {
    NDArray w(c.out_shapes[t]);
    for (int64_t i = 0; i < w.size(); ++i) w.data<float>()[i] = static_cast<float>(c.in[n].at(j++));
    out.push_back(w);
  }
  out.push_back(c.in[n].copy());
  return out;
});

LOOM_OP_REFERENCE("_loom_shard_norms", [](const test::RefCall& c) {
  const size_t n = tensors(c);
  NDArray r1(c.out_shapes[0]), r2(c.out_shapes[1]);
  int64_t j = 0;
  for (size_t t = 0; t < n; ++t) {
    double sw = 0, sg = 0;
    for (int64_t i = 0; i < c.in[t].size(); ++i, ++j) {
      sw += c.in[t].at(i) * c.in[t].at(i);
      sg += c.in[n].at(j) * c.in[n].at(j);
    }
    r1.data<float>()[t] = static_cast<float>(std::sqrt(sw));
    r2.data<float>()[t] = static_cast<float>(std::sqrt(sg));
  }
  return std::vector<NDArray>{r1, r2};
});

// The sweep's samples: sgd_mom_update with per-tensor wd and lr by group, and
// lamb_update_phase2 with per-tensor norms.
LOOM_OP_REFERENCE("_loom_shard_update", [](const test::RefCall& c) {
  const size_t n = tensors(c);
  const std::string op = c.attrs.dict.at("op");
  NDArray y(c.out_shapes[0]);
  int64_t j = 0;
  if (op == "sgd_mom_update") {
    const std::vector<double> wd = parse_double_tuple(c.attrs.dict.at("wds"), "wds");
    const Shape groups = parse_shape(c.attrs.dict.at("groups"));
    const double mu = parse_float(c.attrs.dict.at("momentum"));
    const NDArray &g = c.in[n], &mom = c.in[n + 1];
    for (size_t t = 0; t < n; ++t) {
      const double lr = c.in[n + 2 + static_cast<size_t>(groups[static_cast<int>(t)])].at(0);
      for (int64_t i = 0; i < c.in[t].size(); ++i, ++j) {
        const double w = c.in[t].at(i);
        y.data<float>()[j] = static_cast<float>(w + mu * mom.at(j) - lr * wd[t] * w - lr * g.at(j));
      }
    }
  } else {  // lamb_update_phase2: w - lr * r1/r2 * g
    const NDArray &g = c.in[n], &r1 = c.in[n + 1], &r2 = c.in[n + 2];
    const double lr = c.in[n + 3].at(0);
    for (size_t t = 0; t < n; ++t) {
      const double ratio = r1.at(static_cast<int64_t>(t)) / r2.at(static_cast<int64_t>(t));
      for (int64_t i = 0; i < c.in[t].size(); ++i, ++j)
        y.data<float>()[j] = static_cast<float>(c.in[t].at(i) - lr * ratio * g.at(j));
    }
  }
  return std::vector<NDArray>{y};
});

// Bad attributes are refused when the node is made, naming what is wrong.
TEST(ShardOps, BadUpdateAttributes) {
  const OpDef& op = get_op("_loom_shard_update");
  auto error = [&](Attrs a) {
    try {
      make_op_attrs(op, "upd", std::move(a));
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const Attrs base{{"op", "sgd_mom_update"}, {"num_tensors", "2"},
                   {"world_size", "2"},      {"lr", "0.1"},
                   {"lr_input", "True"},     {"scalars", "group"}};
  EXPECT_EQ(error(base), "accepted");
  Attrs a = base;
  a["op"] = "exp";
  EXPECT_NE(error(a).find("'exp' is not an element-wise update op"), std::string::npos) << error(a);
  a = base;
  a["scalars"] = "group, shared";
  EXPECT_NE(error(a).find("scalars gives 2 kinds"), std::string::npos) << error(a);
  a = base;
  a["scalars"] = "per_rank";
  EXPECT_NE(error(a).find("unknown kind 'per_rank'"), std::string::npos) << error(a);
  a = base;
  a["groups"] = "(0, 1)";
  EXPECT_NE(error(a).find("names group 1 of 1"), std::string::npos) << error(a);
  a = base;
  a["wds"] = "(0.1,)";
  EXPECT_NE(error(a).find("wds has 1 values for 2 tensors"), std::string::npos) << error(a);
  a = base;
  a.erase("world_size");
  EXPECT_NE(error(a).find("world_size"), std::string::npos) << error(a);
}

}  // namespace
}  // namespace loom
