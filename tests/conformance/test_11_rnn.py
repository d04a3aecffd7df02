"""mx.rnn against MXNet 1.9.1: the same script (RUNNER) runs under both.

- Graphs: an unrolled stack (LSTM, GRU, a bidirectional RNN layer, a residual GRU, an
  unfused 2-layer FusedRNNCell) a ConvLSTM+ConvGRU stack and a
  merged bidirectional layer, weights from one seed: the
  argument lists and shapes, the output and internal node names and the forward outputs
  (sequence output and final states) must match.
- FusedRNNCell's flat-vector unpack/pack, encode_sentences and BucketSentenceIter's
  batches (seeded shuffles, NT and TN) must match.
- A bucketing LSTM+GRU language model trained 2 epochs with BucketingModule on
  BucketSentenceIter from explicit initial weights ends with the same weights/perplexity.
- MXNet's save_rnn_checkpoint (per-gate unpacked weights) loads back in Loom packed."""
import json
import os
import subprocess

import numpy as np
import pytest

RUNNER = r'''
import json
import sys
import numpy as np


def build(mx):
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.LSTMCell(5, prefix="lstm_l0_", forget_bias=0.5))
    stack.add(mx.rnn.GRUCell(4, prefix="gru_l1_"))
    stack.add(mx.rnn.BidirectionalCell(mx.rnn.RNNCell(3, prefix="rnn_l2_"),
                                       mx.rnn.RNNCell(3, prefix="rnn_r2_", activation="relu"),
                                       output_prefix="bi2_"))
    stack.add(mx.rnn.ResidualCell(mx.rnn.GRUCell(6, prefix="res_l3_")))
    out, states = stack.unroll(4, mx.sym.Variable("data"), layout="NTC", merge_outputs=True)
    fused = mx.rnn.FusedRNNCell(3, num_layers=2, mode="gru", prefix="fz_").unfuse()
    tnc = mx.sym.swapaxes(out, dim1=0, dim2=1)
    out2, states2 = fused.unroll(4, tnc, layout="TNC", merge_outputs=False)
    flat = []
    for s in states + states2:
        flat.extend(s if isinstance(s, list) else [s])
    return stack, mx.sym.Group([out, mx.sym.Concat(*out2, dim=1)] + flat)


def build_conv(mx):
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.ConvLSTMCell((2, 3, 5, 4), 2, prefix="clstm_"))
    stack.add(mx.rnn.ConvGRUCell((2, 2, 5, 4), 3, i2h_kernel=(1, 1), i2h_pad=(0, 0),
                                 activation="tanh", prefix="cgru_"))
    out, states = stack.unroll(3, mx.sym.Variable("data"), layout="NTC", merge_outputs=True)
    return stack, mx.sym.Group([out] + states)


def extras(mx, outdir):
    """FusedRNNCell's flat-vector slicing, encode_sentences and BucketSentenceIter."""
    import random
    res = {}
    fused = mx.rnn.FusedRNNCell(3, num_layers=2, mode="lstm", bidirectional=True,
                                prefix="fb_")
    size = 2 * 4 * 3 * (5 + 3 + 2) + 2 * 4 * 3 * (2 * 3 + 3 + 2)
    up = fused.unpack_weights({"fb_parameters": mx.nd.array(np.arange(size) * 0.5)})
    for k, v in up.items():
        res["fused/" + k] = v.asnumpy()
    back = fused.pack_weights(up)
    res["fused_back"] = back["fb_parameters"].asnumpy()
    rs = np.random.RandomState(5)
    words = ["w%d" % i for i in range(12)]
    sents = [[words[j] for j in rs.randint(0, 12, size=rs.randint(1, 9))] for _ in range(40)]
    coded, vocab = mx.rnn.encode_sentences(sents, invalid_label=0, start_label=1)
    res["vocab"] = np.array(sorted((w, i) for w, i in vocab.items()), dtype=object).astype(str)
    random.seed(3)
    np.random.seed(3)
    for layout in ("NT", "TN"):
        it = mx.rnn.BucketSentenceIter(coded, 4, buckets=[3, 5, 8], invalid_label=0,
                                       layout=layout)
        for n, b in enumerate(it):
            res["%s/%d/key" % (layout, n)] = np.array(b.bucket_key)
            res["%s/%d/data" % (layout, n)] = b.data[0].asnumpy()
            res["%s/%d/label" % (layout, n)] = b.label[0].asnumpy()
            res["%s/%d/desc" % (layout, n)] = np.array(
                [str(b.provide_data[0].shape), b.provide_data[0].layout])
        res[layout + "/provide"] = np.array([str(it.provide_data[0].shape),
                                             str(it.provide_label[0].shape),
                                             str(it.default_bucket_key)])
    np.savez(outdir + "/extras.npz", **res)


def train_lm(mx, outdir):
    """A bucketing LSTM+GRU language model trained 2 epochs with BucketingModule.fit on
    BucketSentenceIter (seeded shuffles), from the same explicit initial weights."""
    import random
    random.seed(1)
    np.random.seed(1)
    rs = np.random.RandomState(0)
    sents = [list(rs.randint(1, 20, size=rs.randint(3, 11))) for _ in range(64)]
    it = mx.rnn.BucketSentenceIter(sents, 8, buckets=[5, 10], invalid_label=0)
    stack = mx.rnn.SequentialRNNCell()
    stack.add(mx.rnn.LSTMCell(16, prefix="lstm_l0_"))
    stack.add(mx.rnn.GRUCell(16, prefix="gru_l1_"))

    def sym_gen(seq_len):
        data = mx.sym.Variable("data")
        label = mx.sym.Variable("softmax_label")
        embed = mx.sym.Embedding(data=data, input_dim=20, output_dim=8, name="embed")
        stack.reset()
        outputs, _ = stack.unroll(seq_len, inputs=embed, merge_outputs=True)
        pred = mx.sym.FullyConnected(mx.sym.Reshape(outputs, shape=(-1, 16)), num_hidden=20,
                                     name="pred")
        pred = mx.sym.SoftmaxOutput(pred, mx.sym.Reshape(label, shape=(-1,)), name="softmax",
                                    use_ignore=True, ignore_label=0)
        return pred, ("data",), ("softmax_label",)

    s10 = sym_gen(10)[0]
    shapes, _, _ = s10.infer_shape(data=(8, 10), softmax_label=(8, 10))
    prs = np.random.RandomState(7)
    argp = {n: mx.nd.array(prs.uniform(-0.3, 0.3, sh).astype(np.float32))
            for n, sh in zip(s10.list_arguments(), shapes)
            if n not in ("data", "softmax_label")}
    mod = mx.mod.BucketingModule(sym_gen, default_bucket_key=it.default_bucket_key,
                                 context=mx.cpu())
    mod.fit(it, eval_metric=mx.metric.Perplexity(0), num_epoch=2, optimizer="sgd",
            optimizer_params={"learning_rate": 0.1, "momentum": 0.9}, arg_params=argp)
    it.reset()
    score = mod.score(it, mx.metric.Perplexity(0))
    args, _ = mod.get_params()
    res = {"arg/" + k: v.asnumpy() for k, v in args.items()}
    res["perplexity"] = np.array(score[0][1])
    np.savez(outdir + "/lm.npz", **res)


def build_bimerged(mx):
    """A bidirectional layer unrolled with merge_outputs=True (MXNet reverses the backward
    cell's merged output with the ``reverse`` op)."""
    cell = mx.rnn.BidirectionalCell(mx.rnn.LSTMCell(3, prefix="bl_"),
                                    mx.rnn.GRUCell(2, prefix="br_"), output_prefix="bim_")
    out, states = cell.unroll(4, mx.sym.Variable("data"), merge_outputs=True)
    return mx.sym.Group([out] + states[0] + states[1])


def run(mx, outdir):
    extras(mx, outdir)
    train_lm(mx, outdir)
    run_one(mx, outdir, "bim_", build_bimerged(mx), {"data": (3, 4, 5)})
    _, conv = build_conv(mx)
    run_one(mx, outdir, "conv_", conv, {"data": (2, 3, 3, 5, 4)})
    stack, sym = build(mx)
    run_one(mx, outdir, "", sym, {"data": (2, 4, 7)})
    if mx.__name__ == "mxnet":
        arg_shapes, _, _ = sym.infer_shape(data=(2, 4, 7))
        rs = np.random.RandomState(11)
        vals = {n: rs.uniform(-0.7, 0.7, s).astype(np.float32)
                for n, s in zip(sym.list_arguments(), arg_shapes)}
        args = {k: mx.nd.array(v) for k, v in vals.items() if k != "data"}
        mx.rnn.save_rnn_checkpoint(stack, outdir + "/ck", 3, sym, args, {})
        np.savez(outdir + "/params.npz", **{k: v for k, v in vals.items() if k != "data"})
        np.save(outdir + "/ck_data.npy", vals["data"])


def run_one(mx, outdir, tag, sym, shapes):
    arg_shapes, _, _ = sym.infer_shape(**shapes)
    rs = np.random.RandomState(11)
    vals = {n: rs.uniform(-0.7, 0.7, s).astype(np.float32)
            for n, s in zip(sym.list_arguments(), arg_shapes)}
    ex = sym.bind(mx.cpu(), {k: mx.nd.array(v) for k, v in vals.items()})
    outs = {"out%d" % i: o.asnumpy() for i, o in enumerate(ex.forward())}
    np.savez(outdir + "/%souts.npz" % tag, **outs)
    meta = {"args": sym.list_arguments(), "shapes": [list(s) for s in arg_shapes],
            "outputs": sym.list_outputs(),
            "internals": sym.get_internals().list_outputs()}
    with open(outdir + "/%smeta.json" % tag, "w") as f:
        json.dump(meta, f)


if __name__ == "__main__":
    import mxnet
    run(mxnet, sys.argv[1])
'''


@pytest.fixture(scope="module")
def oracle_dir(oracle, tmp_path_factory):
    d = str(tmp_path_factory.mktemp("rnn_oracle"))
    script = os.path.join(d, "runner.py")
    with open(script, "w") as f:
        f.write(RUNNER)
    r = subprocess.run([oracle.py, script, d], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH="", MXNET_SUBGRAPH_VERBOSE="0"), cwd=d)
    if r.returncode != 0:
        pytest.fail("oracle rnn run failed:\n%s%s" % (r.stdout, r.stderr[-4000:]), pytrace=False)
    return d


@pytest.fixture(scope="module")
def loom_dir(mx, tmp_path_factory):
    d = str(tmp_path_factory.mktemp("rnn_loom"))
    ns = {}
    exec(RUNNER, ns)
    with mx.name.NameManager():
        ns["run"](mx, d)
    return d


def _meta(d, tag):
    with open(os.path.join(d, tag + "meta.json")) as f:
        return json.load(f)


@pytest.mark.parametrize("tag", ["", "conv_", "bim_"], ids=["stack", "conv", "bimerged"])
def test_rnn_graph_names_match_mxnet(oracle_dir, loom_dir, tag):
    want, got = _meta(oracle_dir, tag), _meta(loom_dir, tag)
    assert got["args"] == want["args"]
    assert got["shapes"] == want["shapes"]
    assert got["outputs"] == want["outputs"]
    assert got["internals"] == want["internals"]


@pytest.mark.parametrize("tag", ["", "conv_", "bim_"], ids=["stack", "conv", "bimerged"])
def test_rnn_forward_matches_mxnet(oracle_dir, loom_dir, tag):
    want = dict(np.load(os.path.join(oracle_dir, tag + "outs.npz")))
    got = dict(np.load(os.path.join(loom_dir, tag + "outs.npz")))
    assert sorted(got) == sorted(want)
    for k in want:
        assert got[k].shape == want[k].shape, k
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_fused_weights_iterator_vocab_match_mxnet(oracle_dir, loom_dir):
    want = dict(np.load(os.path.join(oracle_dir, "extras.npz")))
    got = dict(np.load(os.path.join(loom_dir, "extras.npz")))
    assert sorted(got) == sorted(want)
    for k in want:
        if want[k].dtype.kind in "US":
            assert got[k].tolist() == want[k].tolist(), k
        else:
            assert got[k].shape == want[k].shape, k
            np.testing.assert_allclose(got[k], want[k], rtol=1e-6, err_msg=k)


def test_bucketing_lm_training_matches_mxnet(oracle_dir, loom_dir):
    want = dict(np.load(os.path.join(oracle_dir, "lm.npz")))
    got = dict(np.load(os.path.join(loom_dir, "lm.npz")))
    assert sorted(got) == sorted(want)
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=1e-4, atol=1e-5, err_msg=k)


def test_loom_loads_mxnet_rnn_checkpoint(mx, oracle_dir):
    ns = {}
    exec(RUNNER, ns)
    with mx.name.NameManager():
        stack, _ = ns["build"](mx)
    raw = mx.nd.load(os.path.join(oracle_dir, "ck-0003.params"))
    assert "arg:lstm_l0_i2h_f_weight" in raw  # MXNet saved per-gate weights
    _, arg, aux = mx.rnn.load_rnn_checkpoint(stack, os.path.join(oracle_dir, "ck"), 3)
    want = dict(np.load(os.path.join(oracle_dir, "params.npz")))
    assert sorted(arg) == sorted(want)
    for k, v in want.items():
        np.testing.assert_allclose(arg[k].asnumpy(), v, rtol=1e-6, err_msg=k)
    # MXNet's saved graph runs in Loom with those weights and gives MXNet's outputs
    sym, _, _ = mx.model.load_checkpoint(os.path.join(oracle_dir, "ck"), 3)
    arg["data"] = mx.nd.array(np.load(os.path.join(oracle_dir, "ck_data.npy")))
    outs = [o.asnumpy() for o in sym.bind(mx.cpu(), arg).forward()]
    ref = dict(np.load(os.path.join(oracle_dir, "outs.npz")))
    assert len(outs) == len(ref)
    for i, o in enumerate(outs):
        np.testing.assert_allclose(o, ref["out%d" % i], rtol=1e-4, atol=1e-5)
