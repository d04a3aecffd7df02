"""mx.metric / mx.init details found by running MXNet's unit tests against Loom
(tests/mxnet_suite): MCC, PCC, micro-averaged Pearson, local vs global statistics, metrics
re-created from their JSON configuration, Constant.dumps with array values. Expected values
are computed here from the confusion counts / NumPy."""
import copy
import json
import math

import numpy as np
import pytest


def test_mcc_macro_and_micro(mx):
    micro = mx.metric.create("mcc", average="micro")
    macro = mx.metric.MCC(average="macro")
    assert math.isnan(micro.get()[1]) and math.isnan(macro.get()[1])
    # all one class predicted and labelled: zero terms of the denominator count as 1 -> 0
    p0, l0 = mx.nd.array([[0.9, 0.1], [0.8, 0.2]]), mx.nd.array([0, 0])
    micro.update([l0], [p0])
    macro.update([l0], [p0])
    assert micro.get()[1] == 0.0 and macro.get()[1] == 0.0
    micro.reset()
    macro.reset()
    b1 = ([mx.nd.array([1, 0]), mx.nd.array([1, 0])],
          [mx.nd.array([[0.1, 0.9], [0.5, 0.5]]), mx.nd.array([[0.85, 0.15], [1.0, 0.0]])])
    b2 = ([mx.nd.array([0]), mx.nd.array([1])],
          [mx.nd.array([[0.6, 0.4]]), mx.nd.array([[0.2, 0.8]])])

    def mcc(tp, fp, fn, tn):
        return (tp * tn - fp * fn) / math.sqrt((tp + fp) * (tp + fn) * (tn + fp) * (tn + fn))
    for m in (micro, macro):
        m.update(*b1)
    assert micro.num_inst == 4 and macro.num_inst == 1
    assert micro.get()[1] == pytest.approx(mcc(1, 0, 1, 2))
    assert macro.get()[1] == pytest.approx(mcc(1, 0, 1, 2))
    for m in (micro, macro):
        m.update(*b2)
    assert micro.get()[1] == pytest.approx(mcc(2, 0, 1, 3))
    assert macro.get()[1] == pytest.approx(0.5 * (mcc(1, 0, 1, 2) + mcc(1, 0, 0, 1)))


def _cm_batch(mx, cm):
    labels, preds = [], []
    eye = np.eye(len(cm))
    for i, row in enumerate(cm):
        for j, n in enumerate(row):
            labels += [i] * n
            preds += [eye[j]] * n
    return [mx.nd.array(labels, dtype="int32")], [mx.nd.array(np.array(preds))]


def test_pcc_binary_equals_mcc_and_multiclass_formula(mx):
    labels, preds = _cm_batch(mx, [[7, 3], [2, 5]])
    pcc, mcc = mx.metric.create("pcc"), mx.metric.create("mcc")
    pcc.update(labels, preds)
    mcc.update(labels, preds)
    assert pcc.get()[1] == pytest.approx(mcc.get()[1])
    pcc.reset()
    pcc.update(labels, [p.argmax(axis=1) for p in preds])   # class indices work too
    assert pcc.get()[1] == pytest.approx(mcc.get()[1])
    cm = np.array([[23, 13, 3], [7, 19, 11], [2, 5, 17]], dtype=float)
    # Pearson correlation of the one-hot prediction and label indicators, from the matrix
    # (rows: label, cols: prediction); symmetric, so the orientation does not matter
    n, rows, cols = cm.sum(), cm.sum(axis=1), cm.sum(axis=0)
    want = (np.trace(cm) * n - rows @ cols) / math.sqrt((n * n - rows @ rows) * (n * n - cols @ cols))
    labels, preds = _cm_batch(mx, cm.astype(int).tolist())
    pcc.reset()
    pcc.update(labels, preds)
    assert pcc.get()[1] == pytest.approx(want)
    # one sample at a time, reversed: same score
    pcc.reset()
    for lab, pr in reversed(list(zip(labels[0], preds[0]))):
        pcc.update([lab.reshape((1,))], [pr.reshape((1, -1))])
    assert pcc.get()[1] == pytest.approx(want)


def test_pearson_micro_pools_all_updates(mx):
    rng = np.random.RandomState(3)
    a, b = rng.rand(4, 3), rng.rand(4, 3)
    c, d = rng.rand(2, 3) * 5, rng.rand(2, 3)
    micro = mx.metric.create("pearsonr", average="micro")
    macro = mx.metric.create("pearsonr", average="macro")
    for m in (micro, macro):
        m.update([mx.nd.array(b)], [mx.nd.array(a)])
        m.update([mx.nd.array(d)], [mx.nd.array(c)])
    pooled = np.corrcoef(np.r_[a.ravel(), c.ravel()], np.r_[b.ravel(), d.ravel()])[0, 1]
    assert micro.get()[1] == pytest.approx(pooled, rel=1e-5)
    each = [np.corrcoef(a.ravel(), b.ravel())[0, 1], np.corrcoef(c.ravel(), d.ravel())[0, 1]]
    assert macro.get()[1] == pytest.approx(np.mean(each), rel=1e-5)


@pytest.mark.parametrize("name,kw", [("f1", {}), ("f1", {"average": "micro"}),
                                      ("mcc", {}), ("mcc", {"average": "micro"}),
                                      ("pcc", {}), ("acc", {})])
def test_reset_local_keeps_global_statistics(mx, name, kw):
    rng = np.random.RandomState(0)

    def batch():
        pred = mx.nd.array(rng.rand(10, 2))
        label = mx.nd.array((rng.rand(10) > 0.5).astype(np.float32))
        return [label], [pred]
    m1 = mx.metric.create(name, **kw)
    m2 = copy.deepcopy(m1)
    for _ in range(5):
        lab, pr = batch()
        m1.update(lab, pr)
        m1.reset_local()
        m2.update(lab, pr)
    assert m1.get_global() == m2.get()
    m1.reset_local()
    m2.reset()
    m1.update(*batch())
    m1.reset_local()
    lab, pr = batch()
    m1.update(lab, pr)
    m2.update(lab, pr)
    assert m1.get() == m2.get()


def test_metrics_recreated_from_json_config(mx):
    for args in [("acc",), ("f1",), ("mcc",), ("perplexity", -1), ("pearsonr",), ("pcc",),
                 ("nll_loss",), ("loss",)]:
        m = mx.metric.create(*args)
        again = mx.metric.create(json.dumps(m.get_config()))
        assert type(again) is type(m) and again.get_config() == m.get_config()
    comp = mx.metric.create(["acc", "f1"])
    again = mx.metric.create(json.dumps(comp.get_config()))
    assert again.get_config() == comp.get_config()
    assert mx.metric.create('{"metric": "Accuracy", "axis": 0}').axis == 0


def test_nll_matches_a_float32_computation(mx):
    pred = mx.nd.array([[0.2, 0.3, 0.5], [0.6, 0.1, 0.3]])
    m = mx.metric.create("nll_loss")
    m.update([mx.nd.array([2, 1])], [pred])
    p2, p1 = pred[0][2].asscalar(), pred[1][1].asscalar()
    assert isinstance(p2, np.float32)           # asscalar gives the dtype's NumPy scalar
    assert m.get()[1] == -(np.log(p2) + np.log(p1)) / 2


def test_constant_dumps_array_values(mx):
    init = mx.init.Constant(mx.nd.ones((2, 3)))
    assert json.loads(init.dumps()) == ["constant", {"value": [[1.0] * 3] * 2}]
    assert mx.init.Constant(1).dumps() == '["constant", {"value": 1}]'
    init = mx.init.Constant(np.arange(3))
    assert init.dumps() == json.dumps(["constant", {"value": [0, 1, 2]}])
    arr = mx.nd.zeros((2, 3))
    init(mx.init.InitDesc("fc_weight"), arr)
    np.testing.assert_array_equal(arr.asnumpy(), [[0, 1, 2], [0, 1, 2]])


def test_zeros_ones_out_and_reshape_error(mx):
    out = mx.nd.full((2, 2), 5)
    assert mx.nd.ones((2, 2), out=out) is out and out.asnumpy().tolist() == [[1, 1], [1, 1]]
    assert mx.nd.zeros((2, 2), out=out) is out and out.asnumpy().sum() == 0
    with pytest.raises(ValueError):
        mx.nd.zeros((2, 3, 5)).reshape((2, 3))
    with pytest.raises(mx.ShapeError):
        mx.nd.zeros((2, 3, 5)).reshape((2, 3))
    assert mx.base.mx_real_t is np.float32


def test_perplexity_with_ignore_label_sums_in_float32(mx):
    """MXNet sums the log-probabilities in the prediction's dtype (float32) even when an
    ignore_label is set: Loom must not promote them to float64 through the mask."""
    pred = np.array([[0.8, 0.2], [0.2, 0.8], [0.3, 0.7], [0.5, 0.5]], np.float32)
    label = np.array([0, 1, 1, 0], np.float32)
    for ignore in (-1, 0):
        keep = label != ignore
        p = pred[np.arange(4), label.astype(np.int32)]
        p = np.where(keep, p, np.float32(1))
        logsum = np.log(np.maximum(np.float32(1e-10), p)).sum(dtype=np.float32)
        want = np.exp(-float(logsum) / int(keep.sum()))
        m = mx.metric.create("perplexity", ignore)
        m.update([mx.nd.array(label)], [mx.nd.array(pred)])
        assert m.get()[1] == want
