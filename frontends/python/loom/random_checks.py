"""Statistical checks of random generators for ``mx.test_utils`` (MXNet 1.x names):
gen_buckets_probs_with_ppf, mean_check, var_check, chi_square_check and verify_generator
(a chi-square goodness-of-fit test repeated over several runs). test_utils exports them."""
import math

import numpy as np


def gen_buckets_probs_with_ppf(ppf, nbuckets):
    """nbuckets equal-probability buckets [(ppf(i/n), ppf((i+1)/n))] and their
    probabilities."""
    if nbuckets <= 0:
        raise ValueError("nbuckets must be positive")
    probs = [1.0 / nbuckets] * nbuckets
    buckets = [(ppf(i / float(nbuckets)), ppf((i + 1) / float(nbuckets)))
               for i in range(nbuckets)]
    return buckets, probs


def mean_check(generator, mu, sigma, nsamples=1000000):
    """Whether the mean of generator(nsamples) is within 3 standard errors of mu."""
    m = np.asarray(generator(nsamples)).mean()
    half = 3 * sigma / np.sqrt(nsamples)
    return bool(mu - half < m < mu + half)


def var_check(generator, sigma, nsamples=1000000):
    """Whether the sample variance is within 3 standard errors of sigma**2."""
    v = np.asarray(generator(nsamples)).var(ddof=1)
    half = 3 * np.sqrt(2 * sigma ** 4 / (nsamples - 1))
    return bool(sigma ** 2 - half < v < sigma ** 2 + half)


def _chi2_sf(x, dof):
    """P[X > x] for X ~ chi-square(dof): the regularized upper incomplete gamma Q(dof/2, x/2)
    (series below a+1, continued fraction above)."""
    a, z = dof / 2.0, x / 2.0
    if z <= 0:
        return 1.0
    lg = math.lgamma(a)
    if z < a + 1:
        term = total = 1.0 / a
        n = a
        for _ in range(10000):
            n += 1
            term *= z / n
            total += term
            if abs(term) < abs(total) * 1e-15:
                break
        return max(0.0, 1.0 - total * math.exp(-z + a * math.log(z) - lg))
    tiny = 1e-300
    b = z + 1 - a
    c = 1 / tiny
    d = 1 / b
    h = d
    for i in range(1, 10000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1 / d
        delta = d * c
        h *= delta
        if abs(delta - 1) < 1e-15:
            break
    return math.exp(-z + a * math.log(z) - lg) * h


def chi_square_check(generator, buckets, probs, nsamples=1000000):
    """Pearson's chi-square test of generator(nsamples) against `probs`. buckets: (low, high)
    ranges for a continuous distribution or the values of a discrete one. Returns
    (p value, observed counts, expected counts)."""
    if not isinstance(buckets, list):
        raise TypeError("buckets must be a list")
    if len(probs) != len(buckets):
        raise ValueError("one probability per bucket")
    samples = np.asarray(generator(nsamples)).reshape(-1)
    expected = (nsamples * np.array(probs, dtype=np.float32)).astype(np.int32)
    obs = np.zeros(len(buckets), dtype=np.int64)
    if isinstance(buckets[0], (list, tuple)):
        edges = np.array([e for b in buckets for e in b], dtype=np.float32)
        if len(edges) <= 64:
            # a pass per edge beats searchsorted's random-access binary searches here
            values = samples.astype(np.float64, copy=False)
            ids = np.zeros(samples.shape, dtype=np.int32)
            for e in edges.astype(np.float64):
                ids += values >= e
        else:
            ids = np.searchsorted(edges, samples, side="right")
        obs[:] = np.bincount(ids // 2, minlength=len(buckets) + 1)[:len(buckets)]
    else:
        for i, v in enumerate(buckets):
            obs[i] = np.count_nonzero(samples == v)
    exp = expected.astype(np.float64)
    # scale expected counts to the observed total, as scipy.stats.chisquare expects
    if exp.sum() > 0:
        exp = exp * (obs.sum() / exp.sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        stat = float(np.sum(np.where(exp > 0, (obs - exp) ** 2 / exp, 0.0)))
    p = _chi2_sf(stat, len(buckets) - 1)
    return p, obs, expected


def verify_generator(generator, buckets, probs, nsamples=1000000, nrepeat=5, success_rate=0.2,
                     alpha=0.05):
    """Repeats chi_square_check nrepeat times; raises AssertionError when fewer than
    nrepeat*success_rate runs have p > alpha. Returns the p values."""
    ps, obs_l, exp_l = [], [], []
    for _ in range(nrepeat):
        p, obs, exp = chi_square_check(generator, buckets, probs, nsamples)
        ps.append(p)
        obs_l.append(obs)
        exp_l.append(exp)
    if (np.array(ps) > alpha).sum() < nrepeat * success_rate:
        raise AssertionError("Generator test fails, Chi-square p=%s, obs_freq=%s, "
                             "expected_freq=%s.\nbuckets=%s, probs=%s" %
                             (ps, obs_l, exp_l, buckets, probs))
    return ps
