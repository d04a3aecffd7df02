"""mx.rnn (MXNet 1.x's legacy symbolic RNN API): unrolled cells against NumPy versions of
the gate equations, parameter names/shapes, layouts, the bucketing iterator and the
checkpoint helpers."""
import os

import numpy as np
import pytest

import loom as mx


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def _np_rnn(x, p, pre, h, act=np.tanh):
    n, t, _ = x.shape
    hs, out = np.zeros((n, h)), []
    for s in range(t):
        hs = act(x[:, s] @ p[pre + "i2h_weight"].T + p[pre + "i2h_bias"]
                 + hs @ p[pre + "h2h_weight"].T + p[pre + "h2h_bias"])
        out.append(hs)
    return np.stack(out, 1), [hs]


def _np_lstm(x, p, pre, h):
    n, t, _ = x.shape
    hs, cs, out = np.zeros((n, h)), np.zeros((n, h)), []
    for s in range(t):
        g = (x[:, s] @ p[pre + "i2h_weight"].T + p[pre + "i2h_bias"]
             + hs @ p[pre + "h2h_weight"].T + p[pre + "h2h_bias"])
        i, f, c, o = (g[:, k * h:(k + 1) * h] for k in range(4))
        cs = _sigmoid(f) * cs + _sigmoid(i) * np.tanh(c)
        hs = _sigmoid(o) * np.tanh(cs)
        out.append(hs)
    return np.stack(out, 1), [hs, cs]


def _np_gru(x, p, pre, h):
    n, t, _ = x.shape
    hs, out = np.zeros((n, h)), []
    for s in range(t):
        a = x[:, s] @ p[pre + "i2h_weight"].T + p[pre + "i2h_bias"]
        b = hs @ p[pre + "h2h_weight"].T + p[pre + "h2h_bias"]
        r = _sigmoid(a[:, :h] + b[:, :h])
        z = _sigmoid(a[:, h:2 * h] + b[:, h:2 * h])
        nn = np.tanh(a[:, 2 * h:] + r * b[:, 2 * h:])
        hs = (1 - z) * nn + z * hs
        out.append(hs)
    return np.stack(out, 1), [hs]


def _run(sym, shapes, seed=0):
    rs = np.random.RandomState(seed)
    arg_shapes, _, _ = sym.infer_shape(**shapes)
    vals = {n: rs.uniform(-0.6, 0.6, s) for n, s in zip(sym.list_arguments(), arg_shapes)}
    ex = sym.bind(mx.cpu(), {k: mx.nd.array(v) for k, v in vals.items()})
    outs = [o.asnumpy() for o in ex.forward()]
    return vals, outs


@pytest.mark.parametrize("kind", ["rnn", "lstm", "gru"])
@pytest.mark.parametrize("layout", ["NTC", "TNC"])
def test_cell_matches_numpy(kind, layout):
    h, n, t, c = 4, 2, 3, 5
    cell = {"rnn": lambda: mx.rnn.RNNCell(h, prefix="r_"),
            "lstm": lambda: mx.rnn.LSTMCell(h, prefix="r_"),
            "gru": lambda: mx.rnn.GRUCell(h, prefix="r_")}[kind]()
    ref = {"rnn": _np_rnn, "lstm": _np_lstm, "gru": _np_gru}[kind]
    out, states = cell.unroll(t, mx.sym.Variable("data"), layout=layout, merge_outputs=True)
    shape = (n, t, c) if layout == "NTC" else (t, n, c)
    vals, got = _run(mx.sym.Group([out] + states), {"data": shape})
    x = vals["data"] if layout == "NTC" else vals["data"].transpose(1, 0, 2)
    want, want_states = ref(x, vals, "r_", h)
    if layout == "TNC":
        want = want.transpose(1, 0, 2)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)
    for g, w in zip(got[1:], want_states):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    gates = {"rnn": 1, "lstm": 4, "gru": 3}[kind]
    arg_shapes, _, _ = out.infer_shape(data=shape)
    assert dict(zip(out.list_arguments(), arg_shapes)) == {
        "data": shape, "r_i2h_weight": (gates * h, c), "r_i2h_bias": (gates * h,),
        "r_h2h_weight": (gates * h, h), "r_h2h_bias": (gates * h,)}


def test_unmerged_outputs_and_names():
    cell = mx.rnn.LSTMCell(3, prefix="lstm_l0_")
    xs = [mx.sym.Variable("x%d" % i) for i in range(3)]
    outs, states = cell.unroll(3, xs)
    assert isinstance(outs, list) and len(outs) == 3
    assert [o.name for o in outs] == ["lstm_l0_t%d_out" % i for i in range(3)]
    # the begin-state counter runs on until reset() (unroll resets it), as in MXNet
    assert [s.name for s in cell.begin_state()] == ["lstm_l0_begin_state_2",
                                                    "lstm_l0_begin_state_3"]
    cell.reset()
    assert [s.name for s in cell.begin_state()] == ["lstm_l0_begin_state_0",
                                                    "lstm_l0_begin_state_1"]
    assert mx.sym.Group(states).list_outputs() == ["lstm_l0_t2_out_output",
                                                   "lstm_l0_t2_state_output"]
    assert cell.state_shape == [(0, 3), (0, 3)]
    assert sorted(cell.params._params) == sorted(
        "lstm_l0_%s_%s" % (g, k) for g in ("i2h", "h2h") for k in ("weight", "bias"))
    # the forget bias lands in i2h_bias through the LSTMBias initializer
    assert "lstmbias" in cell.params._params["lstm_l0_i2h_bias"].attr("__init__")
    merged, _ = cell.unroll(3, xs, merge_outputs=True)
    vals, got = _run(merged, {"x%d" % i: (2, 4) for i in range(3)})
    _, split = _run(mx.sym.Group(outs), {"x%d" % i: (2, 4) for i in range(3)})
    np.testing.assert_allclose(got[0], np.stack(split, 1), rtol=1e-6)


def test_sequential_stack_and_residual():
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.LSTMCell(4, prefix="l0_"))
    stack.add(mx.rnn.ResidualCell(mx.rnn.GRUCell(4, prefix="l1_")))
    out, states = stack.unroll(3, mx.sym.Variable("data"), merge_outputs=True)
    assert len(states) == 3
    vals, got = _run(out, {"data": (2, 3, 5)})
    y0, _ = _np_lstm(vals["data"], vals, "l0_", 4)
    y1, _ = _np_gru(y0, vals, "l1_", 4)
    np.testing.assert_allclose(got[0], y1 + y0, rtol=1e-4, atol=1e-5)


def test_bidirectional():
    cell = mx.rnn.BidirectionalCell(mx.rnn.RNNCell(3, prefix="l_"),
                                    mx.rnn.RNNCell(3, prefix="r_"), output_prefix="bi_")
    out, states = cell.unroll(4, mx.sym.Variable("data"), merge_outputs=True)
    vals, got = _run(out, {"data": (2, 4, 5)})
    fw, _ = _np_rnn(vals["data"], vals, "l_", 3)
    bw, _ = _np_rnn(vals["data"][:, ::-1], vals, "r_", 3)
    np.testing.assert_allclose(got[0], np.concatenate([fw, bw[:, ::-1]], 2),
                               rtol=1e-4, atol=1e-5)
    outs, _ = cell.unroll(4, mx.sym.Variable("data"), merge_outputs=False)
    assert [o.name for o in outs] == ["bi_t%d" % i for i in range(4)]


def test_dropout_zoneout_build():
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.ZoneoutCell(mx.rnn.RNNCell(3, prefix="z_"), 0.5, 0.5))
    stack.add(mx.rnn.DropoutCell(0.5))
    out, _ = stack.unroll(2, mx.sym.Variable("data"), merge_outputs=True)
    # inference mode: dropout is identity, zoneout keeps the new values
    vals, got = _run(out, {"data": (2, 2, 4)})
    want, _ = _np_rnn(vals["data"], vals, "z_", 3)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-5)


def test_pack_unpack_roundtrip():
    cell = mx.rnn.GRUCell(2, prefix="g_")
    rs = np.random.RandomState(1)
    args = {"g_i2h_weight": rs.randn(6, 3), "g_i2h_bias": rs.randn(6),
            "g_h2h_weight": rs.randn(6, 2), "g_h2h_bias": rs.randn(6)}
    nd = {k: mx.nd.array(v) for k, v in args.items()}
    up = cell.unpack_weights(nd)
    assert sorted(up) == sorted("g_%s%s_%s" % (g, s, k) for g in ("i2h", "h2h")
                                for s in ("_r", "_z", "_o") for k in ("weight", "bias"))
    np.testing.assert_allclose(up["g_i2h_z_weight"].asnumpy(), args["g_i2h_weight"][2:4],
                               rtol=1e-6)
    back = cell.pack_weights(up)
    for k, v in args.items():
        np.testing.assert_allclose(back[k].asnumpy(), v, rtol=1e-6)


def test_fused_cell_unfuse_and_weights():
    fused = mx.rnn.FusedRNNCell(3, num_layers=2, mode="lstm", prefix="f_")
    stack = fused.unfuse()
    out, _ = stack.unroll(2, mx.sym.Variable("data"), merge_outputs=True)
    assert out.list_arguments() == ["data"] + ["f_l%d_%s_%s" % (l, g, k) for l in range(2)
                                               for g in ("i2h", "h2h")
                                               for k in ("weight", "bias")]
    # flat vector (input 5, hidden 3, 2 layers, 4 gates) round trip through per-gate names
    size = 4 * 3 * (5 + 3 + 2) + 4 * 3 * (3 + 3 + 2)
    flat = mx.nd.array(np.arange(size, dtype=np.float32))
    up = fused.unpack_weights({"f_parameters": flat})
    assert up["f_l0_i2h_i_weight"].shape == (3, 5)
    assert up["f_l1_h2h_o_weight"].shape == (3, 3)
    np.testing.assert_array_equal(up["f_l0_i2h_i_weight"].asnumpy().ravel(), np.arange(15))
    back = fused.pack_weights(up)
    np.testing.assert_array_equal(back["f_parameters"].asnumpy(), np.arange(size))


def _fused_and_stack(mode, bidirectional, h):
    fused = mx.rnn.FusedRNNCell(h, num_layers=2, mode=mode, bidirectional=bidirectional,
                                get_next_state=True, prefix="")
    make = {"lstm": lambda p: mx.rnn.LSTMCell(h, prefix=p),
            "gru": lambda p: mx.rnn.GRUCell(h, prefix=p),
            "rnn_tanh": lambda p: mx.rnn.RNNCell(h, activation="tanh", prefix=p),
            "rnn_relu": lambda p: mx.rnn.RNNCell(h, activation="relu", prefix=p)}[mode]
    stack = mx.rnn.SequentialRNNCell()
    for l in range(2):
        if bidirectional:
            stack.add(mx.rnn.BidirectionalCell(make("l%d_" % l), make("r%d_" % l),
                                               output_prefix="bi_%d_" % l))
        else:
            stack.add(make("l%d_" % l))
    return fused, stack


@pytest.mark.parametrize("mode", ["lstm", "gru", "rnn_tanh", "rnn_relu"])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_fused_unroll_matches_stack_of_cells(mode, bidirectional):
    # One RNN node computes what the equivalent unrolled cells compute, for the output, the
    # final states and the gradients of data and weights (same weights via pack/unpack).
    n, t, i, h = 3, 4, 5, 6
    fused, stack = _fused_and_stack(mode, bidirectional, h)
    data = mx.sym.Variable("data")
    y1, s1 = fused.unroll(t, data, layout="NTC", merge_outputs=True)
    y2, s2 = stack.unroll(t, data, layout="NTC", merge_outputs=True)
    assert y1.list_arguments() == ["data", "parameters"]
    assert len(s1) == (2 if mode == "lstm" else 1)
    assert all(s.attr("__layout__") == "LNC" for s in s1)
    rng = np.random.RandomState(0)
    x = rng.uniform(-1, 1, (n, t, i)).astype(np.float32)
    e1 = y1.simple_bind(mx.cpu(), data=(n, t, i))
    psize = e1.arg_dict["parameters"].shape[0]
    flat = rng.uniform(-0.5, 0.5, psize).astype(np.float32)
    args = stack.pack_weights(fused.unpack_weights({"parameters": mx.nd.array(flat)}))
    e2 = y2.simple_bind(mx.cpu(), data=(n, t, i))
    e1.arg_dict["data"][:] = x
    e1.arg_dict["parameters"][:] = flat
    e2.arg_dict["data"][:] = x
    for k, v in args.items():
        e2.arg_dict[k][:] = v
    o1 = e1.forward(is_train=True)[0].asnumpy()
    o2 = e2.forward(is_train=True)[0].asnumpy()
    assert o1.shape == (n, t, (2 if bidirectional else 1) * h)
    np.testing.assert_allclose(o1, o2, rtol=1e-5, atol=1e-6)
    dy = mx.nd.array(rng.uniform(-1, 1, o1.shape).astype(np.float32))
    e1.backward([dy])
    e2.backward([dy])
    np.testing.assert_allclose(e1.grad_dict["data"].asnumpy(), e2.grad_dict["data"].asnumpy(),
                               rtol=1e-4, atol=1e-5)
    per_gate = stack.unpack_weights({k: e2.grad_dict[k] for k in args})
    g_fused = fused.pack_weights(per_gate)["parameters"].asnumpy()
    np.testing.assert_allclose(e1.grad_dict["parameters"].asnumpy(), g_fused, rtol=1e-4,
                               atol=1e-5)


def test_fused_states_are_outputs_and_initializer_sets_forget_bias():
    fused = mx.rnn.FusedRNNCell(4, num_layers=1, mode="lstm", get_next_state=True, prefix="f_")
    y, (hy, cy) = fused.unroll(3, mx.sym.Variable("data"), layout="TNC", merge_outputs=True)
    _, out_shapes, _ = mx.sym.Group([y, hy, cy]).infer_shape(data=(3, 2, 5))
    assert out_shapes == [(3, 2, 4), (1, 2, 4), (1, 2, 4)]
    mod = mx.mod.Module(y, label_names=None)
    mod.bind(data_shapes=[("data", (3, 2, 5))])
    mod.init_params(mx.init.Uniform(0.1))
    params = fused.unpack_weights(mod.get_params()[0])
    np.testing.assert_array_equal(params["f_l0_i2h_f_bias"].asnumpy(), np.ones(4))
    np.testing.assert_array_equal(params["f_l0_h2h_f_bias"].asnumpy(), np.ones(4))
    assert np.abs(params["f_l0_i2h_i_weight"].asnumpy()).max() <= 0.1


def test_encode_sentences():
    sents = [["a", "b", "c"], ["b", "d"]]
    coded, vocab = mx.rnn.encode_sentences(sents, invalid_label=0, start_label=0)
    assert vocab["\n"] == 0
    ids = {w: vocab[w] for w in "abcd"}
    assert sorted(ids.values()) == [1, 2, 3, 4]  # 0 is reserved for the invalid label
    assert coded == [[ids[w] for w in s] for s in sents]
    coded2, _ = mx.rnn.encode_sentences([["a", "zz"]], vocab=dict(vocab), unknown_token="a")
    assert coded2[0][0] == ids["a"]
    with pytest.raises(AssertionError):
        mx.rnn.encode_sentences([["zz"]], vocab=dict(vocab))


@pytest.mark.parametrize("layout", ["NT", "TN"])
def test_bucket_sentence_iter(layout, capsys):
    rs = np.random.RandomState(3)
    sents = [list(rs.randint(1, 9, size=L)) for L in [2, 3, 3, 5, 5, 5, 4, 7, 9]]
    it = mx.rnn.BucketSentenceIter(sents, 2, buckets=[3, 5], invalid_label=0, layout=layout)
    assert "discarded 2 sentences" in capsys.readouterr().out
    seen = []
    for batch in it:
        d, l = batch.data[0].asnumpy(), batch.label[0].asnumpy()
        if layout == "TN":
            d, l = d.T, l.T
        assert d.shape == (2, batch.bucket_key)
        np.testing.assert_array_equal(l[:, :-1], d[:, 1:])
        assert (l[:, -1] == 0).all()
        seen.append(batch.bucket_key)
    # bucket 3 holds 3 sentences (1 batch), bucket 5 holds 4 (2 batches)
    assert sorted(seen) == [3, 5, 5]
    assert it.default_bucket_key == 5


def test_rnn_checkpoint_roundtrip(tmp_path):
    cell = mx.rnn.LSTMCell(2, prefix="c_")
    out, _ = cell.unroll(2, mx.sym.Variable("data"), merge_outputs=True)
    rs = np.random.RandomState(0)
    args = {"c_i2h_weight": rs.randn(8, 3), "c_i2h_bias": rs.randn(8),
            "c_h2h_weight": rs.randn(8, 2), "c_h2h_bias": rs.randn(8)}
    nd = {k: mx.nd.array(v) for k, v in args.items()}
    prefix = str(tmp_path / "m")
    mx.rnn.do_rnn_checkpoint(cell, prefix, period=1)(0, out, nd, {})
    raw = mx.nd.load(prefix + "-0001.params")
    assert "arg:c_i2h_f_weight" in raw and "arg:c_i2h_weight" not in raw
    _, arg, aux = mx.rnn.load_rnn_checkpoint(cell, prefix, 1)
    for k, v in args.items():
        np.testing.assert_allclose(arg[k].asnumpy(), v, rtol=1e-6)


def test_conv_rnn_cell_1x1_matches_numpy():
    # with 1x1 kernels the convolutions are per-pixel matrix products
    cell = mx.rnn.ConvRNNCell((2, 3, 4, 5), 2, h2h_kernel=(1, 1), i2h_kernel=(1, 1),
                              i2h_pad=(0, 0), activation="tanh", prefix="cr_")
    assert cell.state_shape == [(0, 2, 4, 5)]
    out, _ = cell.unroll(3, mx.sym.Variable("data"), merge_outputs=True)
    vals, got = _run(out, {"data": (2, 3, 3, 4, 5)})
    x = vals["data"]
    wi, wh = vals["cr_i2h_weight"][:, :, 0, 0], vals["cr_h2h_weight"][:, :, 0, 0]
    h, want = np.zeros((2, 2, 4, 5)), []
    for t in range(3):
        h = np.tanh(np.einsum("oc,nchw->nohw", wi, x[:, t])
                    + vals["cr_i2h_bias"][None, :, None, None]
                    + np.einsum("oc,nchw->nohw", wh, h)
                    + vals["cr_h2h_bias"][None, :, None, None])
        want.append(h)
    np.testing.assert_allclose(got[0], np.stack(want, 1), rtol=1e-4, atol=1e-5)
