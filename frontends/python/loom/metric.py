"""Evaluation metrics (``mx.metric``), following MXNet 1.x semantics.

A metric accumulates ``sum_metric`` and ``num_inst`` in ``update(labels, preds)`` (lists of
NDArrays, or NumPy arrays) and reports ``sum_metric / num_inst`` from ``get()``. Custom
metrics subclass :class:`EvalMetric` and set ``self.sum_metric`` / ``self.num_inst`` in
their ``update``, exactly as in MXNet.
"""
import math
from collections import OrderedDict

import numpy as np

__all__ = ["EvalMetric", "CompositeEvalMetric", "Accuracy", "TopKAccuracy", "F1",
           "Perplexity", "MAE", "MSE", "RMSE", "CrossEntropy", "NegativeLogLikelihood",
           "PearsonCorrelation", "MCC", "PCC", "Loss", "CustomMetric", "np", "create", "register", "alias",
           "check_label_shapes"]

_np = np  # `np` below is MXNet's metric.np factory; keep NumPy reachable
_REGISTRY = {}


def register(klass):
    """Registers an EvalMetric subclass under its lower-cased class name."""
    _REGISTRY[klass.__name__.lower()] = klass
    return klass


def alias(*aliases):
    """Registers extra names for an EvalMetric subclass."""
    def reg(klass):
        for name in aliases:
            _REGISTRY[name.lower()] = klass
        return klass
    return reg


def _asnumpy(x):
    return x.asnumpy() if hasattr(x, "asnumpy") else _np.asarray(x)


def _is_array(x):
    return isinstance(x, _np.ndarray) or (hasattr(x, "asnumpy") and hasattr(x, "shape"))


def check_label_shapes(labels, preds, wrap=False, shape=False):
    """Raises ValueError when the numbers (or, with ``shape``, shapes) of labels and
    predictions differ; with ``wrap``, single arrays are wrapped in lists."""
    if not shape:
        label_shape, pred_shape = len(labels), len(preds)
    else:
        label_shape, pred_shape = tuple(labels.shape), tuple(preds.shape)
    if label_shape != pred_shape:
        raise ValueError("Shape of labels {} does not match shape of predictions {}"
                         .format(label_shape, pred_shape))
    if wrap:
        if _is_array(labels):
            labels = [labels]
        if _is_array(preds):
            preds = [preds]
    return labels, preds


def _wrap(labels, preds):
    if _is_array(labels):
        labels = [labels]
    if _is_array(preds):
        preds = [preds]
    return labels, preds


class EvalMetric(object):
    """Base class: ``update`` adds to ``sum_metric`` / ``num_inst``; ``get`` returns
    ``(name, sum_metric / num_inst)`` (NaN before any instance)."""

    def __init__(self, name, output_names=None, label_names=None, **kwargs):
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self.reset()

    def __str__(self):
        return "EvalMetric: {}".format(dict(self.get_name_value()))

    def get_config(self):
        config = self._kwargs.copy()
        config.update({"metric": self.__class__.__name__, "name": self.name,
                       "output_names": self.output_names, "label_names": self.label_names})
        return config

    def update_dict(self, label, pred):
        """Updates from dicts name -> array, picking ``output_names`` / ``label_names``
        when set."""
        if self.output_names is not None:
            pred = [pred[name] for name in self.output_names]
        else:
            pred = list(pred.values())
        if self.label_names is not None:
            label = [label[name] for name in self.label_names]
        else:
            label = list(label.values())
        self.update(label, pred)

    def update(self, labels, preds):
        raise NotImplementedError()

    def reset(self):
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self):
        self.num_inst = 0
        self.sum_metric = 0.0

    def get(self):
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self.sum_metric / self.num_inst)

    def get_global(self):
        if not self._has_global_stats:
            return self.get()
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self.global_sum_metric / self.global_num_inst)

    def get_name_value(self):
        name, value = self.get()
        if not isinstance(name, list):
            name = [name]
        if not isinstance(value, list):
            value = [value]
        return list(zip(name, value))

    def get_global_name_value(self):
        name, value = self.get_global()
        if not isinstance(name, list):
            name = [name]
        if not isinstance(value, list):
            value = [value]
        return list(zip(name, value))

    # helper for built-ins
    def _add(self, metric, inst):
        self.sum_metric += metric
        self.global_sum_metric += metric
        self.num_inst += inst
        self.global_num_inst += inst


@register
@alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get`` returns lists of names and values."""

    def __init__(self, metrics=None, name="composite", output_names=None, label_names=None):
        super(CompositeEvalMetric, self).__init__(name, output_names=output_names,
                                                  label_names=label_names,
                                                  has_global_stats=True)
        if metrics is None:
            metrics = []
        self.metrics = [create(m) for m in metrics]

    def add(self, metric):
        self.metrics.append(create(metric))

    def get_metric(self, index):
        try:
            return self.metrics[index]
        except IndexError:
            raise ValueError("Metric index {} is out of range 0 and {}".format(
                index, len(self.metrics)))

    def update_dict(self, labels, preds):
        if self.label_names is not None:
            labels = OrderedDict([i for i in labels.items() if i[0] in self.label_names])
        if self.output_names is not None:
            preds = OrderedDict([i for i in preds.items() if i[0] in self.output_names])
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels, preds):
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self):
        for metric in getattr(self, "metrics", []):
            metric.reset()

    def reset_local(self):
        for metric in self.metrics:
            metric.reset_local()

    def _collect(self, getter):
        names, values = [], []
        for metric in self.metrics:
            name, value = getattr(metric, getter)()
            if isinstance(name, str):
                name = [name]
            if isinstance(value, (float, int, _np.generic)):
                value = [value]
            names.extend(name)
            values.extend(value)
        return (names, values)

    def get(self):
        return self._collect("get")

    def get_global(self):
        return self._collect("get_global")

    def get_config(self):
        config = super(CompositeEvalMetric, self).get_config()
        config.update({"metrics": [m.get_config() for m in self.metrics]})
        return config


@register
@alias("acc")
class Accuracy(EvalMetric):
    """Fraction of correct predictions; predictions whose shape differs from the label's
    are reduced with argmax over ``axis``."""

    def __init__(self, axis=1, name="accuracy", output_names=None, label_names=None):
        super(Accuracy, self).__init__(name, axis=axis, output_names=output_names,
                                       label_names=label_names, has_global_stats=True)
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred_label in zip(labels, preds):
            pred_label = _asnumpy(pred_label)
            label = _asnumpy(label)
            if pred_label.shape != label.shape:
                pred_label = _np.argmax(pred_label, axis=self.axis)
            pred_label = pred_label.astype("int32").ravel()
            label = label.astype("int32").ravel()
            check_label_shapes(label, pred_label, shape=True)
            num_correct = int((pred_label == label).sum())
            self._add(num_correct, len(pred_label))


@register
@alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    """Fraction of samples whose label is among the ``top_k`` highest scores."""

    def __init__(self, top_k=1, name="top_k_accuracy", output_names=None, label_names=None):
        super(TopKAccuracy, self).__init__(name, top_k=top_k, output_names=output_names,
                                           label_names=label_names, has_global_stats=True)
        self.top_k = top_k
        if self.top_k <= 1:
            raise ValueError("Please use Accuracy if top_k is no more than 1")
        self.name += "_%d" % self.top_k

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            pred = _asnumpy(pred).astype("float32")
            label = _asnumpy(label).astype("int32")
            if pred.ndim > 2:
                raise ValueError("TopKAccuracy expects predictions of rank 1 or 2")
            if pred.ndim == 2:
                pred_label = _np.argpartition(pred, -min(self.top_k, pred.shape[1]), axis=1)
            else:
                pred_label = pred
            check_label_shapes(label, pred_label)
            num_samples = pred_label.shape[0]
            if pred_label.ndim == 1:
                correct = int((pred_label.astype("int32").flat == label.flat).sum())
            else:
                num_classes = pred_label.shape[1]
                top_k = min(num_classes, self.top_k)
                correct = 0
                for j in range(top_k):
                    correct += int((pred_label[:, num_classes - 1 - j].flat == label.flat).sum())
            self._add(correct, num_samples)


class _BinaryClassificationMetrics(object):
    """Confusion counts of a binary classifier, since the last local reset (true_positives,
    ...) and since the last full reset (global_true_positives, ...)."""

    _FIELDS = ("true_positives", "false_positives", "false_negatives", "true_negatives")

    def __init__(self):
        self.reset_stats()

    def local_reset_stats(self):
        for f in self._FIELDS:
            setattr(self, f, 0)

    def reset_stats(self):
        self.local_reset_stats()
        for f in self._FIELDS:
            setattr(self, "global_" + f, 0)

    def update_binary_stats(self, label, pred):
        pred = _asnumpy(pred)
        label = _asnumpy(label).astype("int32")
        pred_label = _np.argmax(pred, axis=1)
        check_label_shapes(label, pred)
        if len(_np.unique(label)) > 2:
            raise ValueError("%s currently only supports binary classification."
                             % self.__class__.__name__)
        pred_true = (pred_label == 1)
        label_true = (label == 1)
        counts = (int((pred_true & label_true).sum()), int((pred_true & ~label_true).sum()),
                  int((~pred_true & label_true).sum()), int((~pred_true & ~label_true).sum()))
        for f, c in zip(self._FIELDS, counts):
            setattr(self, f, getattr(self, f) + c)
            setattr(self, "global_" + f, getattr(self, "global_" + f) + c)

    def _counts(self, use_global):
        pre = "global_" if use_global else ""
        return [getattr(self, pre + f) for f in self._FIELDS]

    def _fscore(self, use_global):
        tp, fp, fn, _ = self._counts(use_global)
        precision = float(tp) / (tp + fp) if tp + fp > 0 else 0.0
        recall = float(tp) / (tp + fn) if tp + fn > 0 else 0.0
        if precision + recall > 0:
            return 2 * precision * recall / (precision + recall)
        return 0.0

    @property
    def precision(self):
        tp, fp, _, _ = self._counts(False)
        return float(tp) / (tp + fp) if tp + fp > 0 else 0.0

    @property
    def recall(self):
        tp, _, fn, _ = self._counts(False)
        return float(tp) / (tp + fn) if tp + fn > 0 else 0.0

    @property
    def fscore(self):
        return self._fscore(False)

    @property
    def global_fscore(self):
        return self._fscore(True)

    def matthewscc(self, use_global=False):
        """(TP*TN - FP*FN) / sqrt of the product of the nonzero marginal sums; 0 without
        examples."""
        tp, fp, fn, tn = [float(c) for c in self._counts(use_global)]
        if tp + fp + fn + tn == 0:
            return 0.0
        denom = 1.0
        for t in (tp + fp, tp + fn, tn + fp, tn + fn):
            if t != 0:
                denom *= t
        return (tp * tn - fp * fn) / math.sqrt(denom)

    @property
    def total_examples(self):
        return sum(self._counts(False))

    @property
    def global_total_examples(self):
        return sum(self._counts(True))


class _BinaryMetric(EvalMetric):
    """F1 / MCC: 'macro' averages the per-update scores, 'micro' scores the pooled counts."""

    def __init__(self, name, output_names, label_names, average):
        self.average = average
        self.metrics = _BinaryClassificationMetrics()
        super(_BinaryMetric, self).__init__(name=name, output_names=output_names,
                                            label_names=label_names, has_global_stats=True)

    def _score(self, use_global):
        raise NotImplementedError()

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self.metrics.update_binary_stats(label, pred)
        if self.average == "macro":
            self.sum_metric += self._score(False)
            self.global_sum_metric += self._score(True)
            self.num_inst += 1
            self.global_num_inst += 1
            self.metrics.reset_stats()
        else:
            self.num_inst = self.metrics.total_examples
            self.global_num_inst = self.metrics.global_total_examples
            self.sum_metric = self._score(False) * self.num_inst
            self.global_sum_metric = self._score(True) * self.global_num_inst

    def reset(self):
        super(_BinaryMetric, self).reset()
        self.metrics.reset_stats()

    def reset_local(self):
        super(_BinaryMetric, self).reset_local()
        self.metrics.local_reset_stats()


@register
class F1(_BinaryMetric):
    """Binary F1 score; ``average='macro'`` averages per-update scores, 'micro' pools
    counts."""

    def __init__(self, name="f1", output_names=None, label_names=None, average="macro"):
        super(F1, self).__init__(name, output_names, label_names, average)

    def _score(self, use_global):
        return self.metrics._fscore(use_global)


@register
class MCC(_BinaryMetric):
    """Matthews correlation coefficient of a binary classifier (zero terms of the
    denominator count as 1); ``average`` as for F1."""

    def __init__(self, name="mcc", output_names=None, label_names=None, average="macro"):
        super(MCC, self).__init__(name, output_names, label_names, average)

    def _score(self, use_global):
        return self.metrics.matthewscc(use_global)


@register
class PCC(EvalMetric):
    """Multiclass Matthews/Pearson correlation from the confusion matrix accumulated over
    all updates (equals MCC for two classes); predictions are class scores (argmax over
    axis 1) or class indices of the label's shape."""

    def __init__(self, name="pcc", output_names=None, label_names=None,
                 has_global_stats=True):
        self.k = 2
        super(PCC, self).__init__(name, output_names=output_names, label_names=label_names,
                                  has_global_stats=has_global_stats)

    @staticmethod
    def _calc(cm):
        n = cm.sum()
        rows, cols = cm.sum(axis=1), cm.sum(axis=0)
        cov_xx = _np.sum(rows * (n - rows))
        cov_yy = _np.sum(cols * (n - cols))
        if cov_xx == 0 or cov_yy == 0:
            return float("nan")
        cov_xy = _np.sum(cm.diagonal() * n - rows * cols)
        return float(cov_xy / (cov_xx * cov_yy) ** 0.5)

    def _grow(self, k):
        if k > self.k:
            pad = ((0, k - self.k), (0, k - self.k))
            self.lcm = _np.pad(self.lcm, pad)
            self.gcm = _np.pad(self.gcm, pad)
            self.k = k

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _asnumpy(label).astype("int64").ravel()
            pred = _asnumpy(pred)
            if pred.shape != _asnumpy(label).shape and pred.ndim > 1:
                pred = pred.argmax(axis=1)
            pred = pred.astype("int64").ravel()
            self._grow(int(max(pred.max(initial=0), label.max(initial=0))) + 1)
            batch = _np.zeros((self.k, self.k))
            _np.add.at(batch, (pred, label), 1)
            self.lcm += batch
            self.gcm += batch
        self.num_inst += 1
        self.global_num_inst += 1

    @property
    def sum_metric(self):
        return self._calc(self.lcm) * self.num_inst

    @sum_metric.setter
    def sum_metric(self, value):
        pass

    @property
    def global_sum_metric(self):
        return self._calc(self.gcm) * self.global_num_inst

    @global_sum_metric.setter
    def global_sum_metric(self, value):
        pass

    def reset(self):
        self.global_num_inst = 0
        self.gcm = _np.zeros((self.k, self.k))
        self.reset_local()

    def reset_local(self):
        self.num_inst = 0
        self.lcm = _np.zeros((self.k, self.k))


@register
class Perplexity(EvalMetric):
    """exp(mean negative log-likelihood of the labels); labels equal to ``ignore_label``
    are skipped."""

    def __init__(self, ignore_label, axis=-1, name="perplexity", output_names=None,
                 label_names=None):
        super(Perplexity, self).__init__(name, ignore_label=ignore_label,
                                         output_names=output_names, label_names=label_names,
                                         has_global_stats=True)
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        loss, num = 0.0, 0
        for label, pred in zip(labels, preds):
            label = _asnumpy(label)
            pred = _asnumpy(pred)
            if label.size != pred.size / pred.shape[self.axis]:
                raise ValueError("shape mismatch: %s vs. %s" % (label.shape, pred.shape))
            label = label.reshape((label.size,)).astype("int64")
            pred = _np.moveaxis(pred, self.axis, -1).reshape((label.size, -1))
            prob = pred[_np.arange(label.size), _np.clip(label, 0, pred.shape[1] - 1)]
            if self.ignore_label is not None:
                # In the prediction's dtype, as MXNet: a bool/int mask would promote float32
                # probabilities to float64 and change the sum's rounding.
                ignore = (label == self.ignore_label).astype(prob.dtype)
                num -= int(ignore.sum())
                prob = prob * (1 - ignore) + ignore
            loss -= float(_np.sum(_np.log(_np.maximum(1e-10, prob))))
            num += label.size
        self._add(loss, num)

    def get(self):
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.sum_metric / self.num_inst))

    def get_global(self):
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, math.exp(self.global_sum_metric / self.global_num_inst))


def _regression_pair(label, pred):
    label = _asnumpy(label)
    pred = _asnumpy(pred)
    if label.ndim == 1:
        label = label.reshape(label.shape[0], 1)
    if pred.ndim == 1:
        pred = pred.reshape(pred.shape[0], 1)
    return label, pred


@register
class MAE(EvalMetric):
    """Mean absolute error, averaged over batches (each batch's mean counts once)."""

    def __init__(self, name="mae", output_names=None, label_names=None):
        super(MAE, self).__init__(name, output_names=output_names, label_names=label_names,
                                  has_global_stats=True)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _regression_pair(label, pred)
            self._add(float(_np.abs(label - pred).mean()), 1)


@register
class MSE(EvalMetric):
    """Mean squared error, averaged over batches."""

    def __init__(self, name="mse", output_names=None, label_names=None):
        super(MSE, self).__init__(name, output_names=output_names, label_names=label_names,
                                  has_global_stats=True)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _regression_pair(label, pred)
            self._add(float(((label - pred) ** 2.0).mean()), 1)


@register
class RMSE(EvalMetric):
    """Root mean squared error of each batch, averaged over batches."""

    def __init__(self, name="rmse", output_names=None, label_names=None):
        super(RMSE, self).__init__(name, output_names=output_names, label_names=label_names,
                                   has_global_stats=True)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label, pred = _regression_pair(label, pred)
            self._add(float(_np.sqrt(((label - pred) ** 2.0).mean())), 1)


@register
@alias("ce")
class CrossEntropy(EvalMetric):
    """Mean of -log(p[label] + eps) over samples."""

    def __init__(self, eps=1e-12, name="cross-entropy", output_names=None, label_names=None):
        super(CrossEntropy, self).__init__(name, eps=eps, output_names=output_names,
                                           label_names=label_names, has_global_stats=True)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _asnumpy(label).ravel()
            pred = _asnumpy(pred)
            if label.shape[0] != pred.shape[0]:
                raise ValueError("CrossEntropy: %d labels for %d predictions"
                                 % (label.shape[0], pred.shape[0]))
            prob = pred[_np.arange(label.shape[0]), _np.int64(label)]
            self._add(float((-_np.log(prob + self.eps)).sum()), label.shape[0])


@register
@alias("nll_loss")
class NegativeLogLikelihood(EvalMetric):
    """Mean of -log(p[label] + eps) over samples (name 'nll-loss')."""

    def __init__(self, eps=1e-12, name="nll-loss", output_names=None, label_names=None):
        super(NegativeLogLikelihood, self).__init__(name, eps=eps, output_names=output_names,
                                                    label_names=label_names,
                                                    has_global_stats=True)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _asnumpy(label).ravel()
            pred = _asnumpy(pred)
            num_examples = pred.shape[0]
            if label.shape[0] != num_examples:
                raise ValueError("NegativeLogLikelihood: %d labels for %d predictions"
                                 % (label.shape[0], num_examples))
            prob = pred[_np.arange(num_examples, dtype=_np.int64), _np.int64(label)]
            self._add(float((-_np.log(prob + self.eps)).sum()), num_examples)


@register
@alias("pearsonr")
class PearsonCorrelation(EvalMetric):
    """Pearson correlation of flattened labels and predictions: ``average='macro'``
    averages the per-array correlations, 'micro' is the correlation of everything seen
    since the last reset."""

    def __init__(self, name="pearsonr", output_names=None, label_names=None,
                 average="macro"):
        self.average = average
        super(PearsonCorrelation, self).__init__(name, output_names=output_names,
                                                 label_names=label_names,
                                                 has_global_stats=True)

    def reset(self):
        super(PearsonCorrelation, self).reset()
        # running sums for 'micro': n, sum x, sum y, and the centred co-moments
        self._n, self._mean_l, self._mean_p = 0, 0.0, 0.0
        self._m2_l, self._m2_p, self._cov = 0.0, 0.0, 0.0

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _asnumpy(label)
            pred = _asnumpy(pred)
            check_label_shapes(label, pred, False, True)
            label = label.ravel().astype(_np.float64)
            pred = pred.ravel().astype(_np.float64)
            if self.average == "macro":
                self._add(float(_np.corrcoef(pred, label)[0, 1]), 1)
                continue
            # merge this batch's moments into the running ones (Chan et al.)
            nb = label.size
            mb_l, mb_p = label.mean(), pred.mean()
            dl, dp = label - mb_l, pred - mb_p
            n = self._n + nb
            d_l, d_p = mb_l - self._mean_l, mb_p - self._mean_p
            self._m2_l += float(_np.dot(dl, dl)) + d_l * d_l * self._n * nb / n
            self._m2_p += float(_np.dot(dp, dp)) + d_p * d_p * self._n * nb / n
            self._cov += float(_np.dot(dl, dp)) + d_l * d_p * self._n * nb / n
            self._mean_l += d_l * nb / n
            self._mean_p += d_p * nb / n
            self._n = n
            self.num_inst += 1
            self.global_num_inst += 1

    def get(self):
        if self.num_inst == 0:
            return (self.name, float("nan"))
        if self.average == "macro":
            return (self.name, self.sum_metric / self.num_inst)
        return (self.name, self._cov / math.sqrt(self._m2_l * self._m2_p))


@register
class Loss(EvalMetric):
    """Mean of the (loss) outputs: sums every element of the predictions; labels are
    ignored."""

    def __init__(self, name="loss", output_names=None, label_names=None):
        super(Loss, self).__init__(name, output_names=output_names, label_names=label_names,
                                   has_global_stats=True)

    def update(self, _, preds):
        if _is_array(preds):
            preds = [preds]
        for pred in preds:
            p = _asnumpy(pred)
            self._add(float(p.sum()), int(p.size))


@register
class Torch(Loss):
    """Dummy metric for torch criterions (MXNet compatibility)."""

    def __init__(self, name="torch", output_names=None, label_names=None):
        super(Torch, self).__init__(name, output_names=output_names, label_names=label_names)


@register
class Caffe(Loss):
    """Dummy metric for caffe criterions (MXNet compatibility)."""

    def __init__(self, name="caffe", output_names=None, label_names=None):
        super(Caffe, self).__init__(name, output_names=output_names, label_names=label_names)


@register
class CustomMetric(EvalMetric):
    """Metric from ``feval(label, pred)`` on NumPy arrays, returning a value (counted as
    one instance) or a ``(sum_metric, num_inst)`` tuple."""

    def __init__(self, feval, name=None, allow_extra_outputs=False, output_names=None,
                 label_names=None):
        if name is None:
            name = feval.__name__
            if name.find("<") != -1:
                name = "custom(%s)" % name
        super(CustomMetric, self).__init__(name, feval=feval,
                                           allow_extra_outputs=allow_extra_outputs,
                                           output_names=output_names,
                                           label_names=label_names, has_global_stats=True)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels, preds):
        labels, preds = _wrap(labels, preds)
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        for pred, label in zip(preds, labels):
            reval = self._feval(_asnumpy(label), _asnumpy(pred))
            if isinstance(reval, tuple):
                sum_metric, num_inst = reval
                self._add(sum_metric, num_inst)
            else:
                self._add(reval, 1)

    def get_config(self):
        raise NotImplementedError("CustomMetric cannot be serialized")


def np(numpy_feval, name=None, allow_extra_outputs=False):
    """Makes a CustomMetric from a function of NumPy (label, pred) arrays."""
    def feval(label, pred):
        return numpy_feval(label, pred)
    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)


def create(metric, *args, **kwargs):
    """Makes a metric from a name ('acc', 'ce', 'mse', 'top_k_accuracy', ...), an
    EvalMetric instance (returned as is), a function (CustomMetric), or a list of any of
    these (CompositeEvalMetric)."""
    if isinstance(metric, EvalMetric):
        return metric
    if isinstance(metric, type) and issubclass(metric, EvalMetric):
        return metric(*args, **kwargs)
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, (list, tuple)):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    if isinstance(metric, dict):
        config = dict(metric)
        name = config.pop("metric")
        if "metrics" in config:
            config["metrics"] = [create(m) for m in config["metrics"]]
        kwargs = dict(config, **kwargs)
        return create(name, *args, **kwargs)
    if isinstance(metric, str) and metric.lstrip()[:1] in ("{", "["):
        # a configuration from get_config(), as JSON (MXNet's registry accepts these)
        import json
        return create(json.loads(metric), *args, **kwargs)
    if isinstance(metric, str):
        klass = _REGISTRY.get(metric.lower())
        if klass is None:
            raise ValueError("Cannot find metric '%s'. Known: %s"
                             % (metric, ", ".join(sorted(_REGISTRY))))
        return klass(*args, **kwargs)
    raise TypeError("cannot create a metric from %r" % (metric,))
