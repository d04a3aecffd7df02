"""MXNet's Python-level wrappers over `_split_v2` and `_histogram` (in MXNet they live in
ndarray.py / symbol.py, not in the op registry): split_v2 and histogram for mx.nd and mx.sym.

ndarray.py and symbol.py re-export them:
    from ._split_v2 import split_v2_nd as split_v2, histogram_nd as histogram   # ndarray.py
    from ._split_v2 import split_v2_sym as split_v2, histogram_sym as histogram # symbol.py
"""
import numbers

import numpy as np


def _int_like(x):
    return isinstance(x, (numbers.Integral, np.integer)) and not isinstance(x, bool)


def split_v2_nd(ary, indices_or_sections, axis=0, squeeze_axis=False):
    """Splits an NDArray into sub-arrays along an axis, as numpy.split: an int gives that many
    equal pieces (the axis must divide evenly), a tuple gives the split points."""
    from . import ndarray as nd
    if _int_like(indices_or_sections):
        sections = int(indices_or_sections)
        axis_size = ary.shape[axis]
        if axis_size % sections:
            raise ValueError("array split does not result in an equal division")
        section_size = axis_size // sections
        indices = [i * section_size for i in range(sections)]
    elif isinstance(indices_or_sections, (tuple, list)):
        indices = [0] + list(indices_or_sections)
    else:
        raise ValueError("indices_or_sections must either int or tuple of ints")
    return nd._internal._split_v2(ary, indices=tuple(indices), axis=axis,
                                  squeeze_axis=squeeze_axis)


def split_v2_sym(ary, indices_or_sections, axis=0, squeeze_axis=False):
    """Symbol version of split_v2: an int is passed as `sections` (the axis size is not known
    yet), a tuple as split points."""
    from . import symbol as sym
    indices, sections = [], 0
    if _int_like(indices_or_sections):
        sections = int(indices_or_sections)
    elif isinstance(indices_or_sections, (tuple, list)):
        indices = [0] + list(indices_or_sections)
    else:
        raise ValueError("indices_or_sections must either int or tuple of ints")
    return sym._internal._split_v2(ary, indices=tuple(indices), axis=axis,
                                   squeeze_axis=squeeze_axis, sections=sections)


def histogram_nd(a, bins=10, range=None):  # pylint: disable=redefined-builtin
    """Histogram of the flattened array: (counts, bin edges). `bins` is a bin count (with
    `range`, or numpy's own bins over the data's range when range is None) or an NDArray of
    bin edges."""
    from . import ndarray as nd
    if isinstance(bins, nd.NDArray):
        return nd._internal._histogram(data=a, bins=bins)
    if _int_like(bins):
        if range is None:
            res, bin_bounds = np.histogram(a.asnumpy(), bins=bins)
            return nd.array(res), nd.array(bin_bounds)
        return nd._internal._histogram(data=a, bin_cnt=int(bins), range=tuple(range))
    raise ValueError("bins argument should be either an integer or an NDArray")


def histogram_sym(a, bins=10, range=None, **kwargs):  # pylint: disable=redefined-builtin
    """Symbol version of histogram: `bins` is a Symbol of edges, or a count with `range`."""
    from . import symbol as sym
    if isinstance(bins, sym.Symbol):
        return sym._internal._histogram(data=a, bins=bins, **kwargs)
    if _int_like(bins):
        if range is None:
            raise ValueError("null range is not supported in symbol mode")
        return sym._internal._histogram(data=a, bin_cnt=int(bins), range=tuple(range), **kwargs)
    raise ValueError("bins argument should be either an integer or an NDArray")
