// Training-step graphs (graph/step_builder.h): make_step from plain dicts (loom/train.py and
// loom/optimizer.py build them), training-state checkpoints, EMA evaluation helpers.
#include "graph/step_builder.h"

#include "common.h"

namespace loom::pyb {
namespace {

template <class T>
void take(const py::dict& d, const char* k, T& v) {
  if (d.contains(k) && !d[k].is_none()) v = py::cast<T>(d[k]);
}

OptimizerSpec optimizer_from(const py::dict& d) {
  OptimizerSpec o;
  take(d, "name", o.name);
  take(d, "learning_rate", o.learning_rate);
  take(d, "wd", o.wd);
  take(d, "rescale_grad", o.rescale_grad);
  take(d, "clip_gradient", o.clip_gradient);
  take(d, "momentum", o.momentum);
  take(d, "beta1", o.beta1);
  take(d, "beta2", o.beta2);
  if (d.contains("epsilon") && !d["epsilon"].is_none()) o.epsilon = py::cast<double>(d["epsilon"]);
  take(d, "gamma1", o.gamma1);
  take(d, "gamma2", o.gamma2);
  take(d, "centered", o.centered);
  take(d, "clip_weights", o.clip_weights);
  take(d, "lower_bound", o.lower_bound);
  take(d, "upper_bound", o.upper_bound);
  take(d, "bias_correction", o.bias_correction);
  take(d, "lr_mult", o.lr_mult);
  take(d, "wd_mult", o.wd_mult);
  if (d.contains("lr_scheduler") && !d["lr_scheduler"].is_none()) {
    py::dict s = d["lr_scheduler"];
    LrSchedulerSpec& l = o.lr_scheduler;
    take(s, "type", l.type);
    take(s, "step", l.step);
    take(s, "steps", l.steps);
    take(s, "factor", l.factor);
    take(s, "stop_factor_lr", l.stop_factor_lr);
    take(s, "max_update", l.max_update);
    take(s, "final_lr", l.final_lr);
    take(s, "pwr", l.pwr);
    take(s, "warmup_steps", l.warmup_steps);
    take(s, "warmup_begin_lr", l.warmup_begin_lr);
    take(s, "warmup_final_lr", l.warmup_final_lr);
    take(s, "warmup_mode", l.warmup_mode);
    if (s.contains("base_lr") && !s["base_lr"].is_none()) l.base_lr = py::cast<double>(s["base_lr"]);
  }
  return o;
}

EmaOptions ema_from(const py::dict& d) {
  EmaOptions e;
  take(d, "decay", e.decay);
  take(d, "schedule", e.schedule);
  take(d, "init", e.init);
  take(d, "include_aux", e.include_aux);
  take(d, "tau", e.tau);
  take(d, "gamma", e.gamma);
  take(d, "power", e.power);
  take(d, "min_decay", e.min_decay);
  take(d, "update_after_step", e.update_after_step);
  take(d, "start_step", e.start_step);
  return e;
}

DistOptions dist_from(const py::dict& d) {
  DistOptions o;
  take(d, "bucket_mb", o.bucket_mb);
  take(d, "first_bucket_mb", o.first_bucket_mb);
  take(d, "shard_ema", o.shard_ema);
  take(d, "shard_optimizer", o.shard_optimizer);
  take(d, "overlap", o.overlap);
  take(d, "bn_stats", o.bn_stats);
  take(d, "world_size", o.world_size);
  return o;
}

py::dict array_map(const std::map<std::string, NDArray>& m) {
  py::dict d;
  for (const auto& [k, v] : m) d[py::str(k)] = v;
  return d;
}

}  // namespace

void init_step(py::module_& m) {
  m.def(
      "_make_step",
      [](const Symbol& loss, py::dict opt, int accumulate, bool grad_mean, py::object ema,
         std::vector<std::string> input_names, std::vector<std::string> fixed, bool bucket,
         std::string gradient_suffix, py::object dist) {
        StepOptions o;
        if (!dist.is_none()) o.dist = dist_from(dist);
        o.gradient_suffix = std::move(gradient_suffix);
        o.accumulate = accumulate;
        o.grad_mean = grad_mean;
        if (!ema.is_none()) o.ema = ema_from(ema);
        o.input_names = std::move(input_names);
        o.fixed_param_names = std::move(fixed);
        o.bucket = bucket;
        return make_step(loss, optimizer_from(opt), o);
      },
      py::arg("loss"), py::arg("optimizer"), py::arg("accumulate") = 1,
      py::arg("grad_mean") = true, py::arg("ema") = py::none(),
      py::arg("input_names") = std::vector<std::string>{},
      py::arg("fixed_param_names") = std::vector<std::string>{}, py::arg("bucket") = true,
      py::arg("gradient_suffix") = std::string(), py::arg("dist") = py::none());
  m.def("_classify_step_inputs", [](const Symbol& s) {
    py::dict d;
    for (const auto& [n, k] : classify_step_inputs(s)) {
      std::string p = step_state_prefix(k);
      d[py::str(n)] = p.empty() ? std::string("input") : p.substr(0, p.size() - 1);
    }
    return d;
  });
  m.def("_save_training_state", [](const std::string& path, const Executor& e) {
    py::gil_scoped_release nogil;
    save_training_state(path, e);
  });
  m.def(
      "_load_training_state",
      [](const std::string& path, Executor& e, bool strict) {
        py::gil_scoped_release nogil;
        load_training_state(path, e, strict);
      },
      py::arg("path"), py::arg("exe"), py::arg("strict") = true);
  m.def("_ema_params", [](const Executor& e) {
    EmaParams p = ema_params(e);
    return py::make_tuple(array_map(p.arg), array_map(p.aux));
  });
  m.def("_bind_ema", [](const Symbol& net, const Executor& step, py::dict shapes, py::handle ctx) {
    std::map<std::string, Shape> s;
    for (auto kv : shapes) s[py::cast<std::string>(kv.first)] = shape_from_py(kv.second);
    BindOptions o;
    o.default_req = Req::kNull;
    if (!ctx.is_none()) o.device = py::cast<Device>(ctx);
    py::gil_scoped_release nogil;
    return bind_ema(net, step, s, o);
  });
  m.def("_refresh_ema", [](const Executor& step, Executor& eval) { refresh_ema(step, eval); });
  py::class_<EmaSwap>(m, "_EmaSwap")
      .def(py::init<Executor&>(), py::keep_alive<1, 2>())
      .def("restore", &EmaSwap::restore);
}

}  // namespace loom::pyb
