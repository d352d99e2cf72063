"""Run scores are read as C's ``strtod`` reads them (trec_eval reads them with ``atof``), checked
against the C library's own ``strtod`` through ctypes: every token that strtod reads whole gives its
double bit for bit (decimal, exponent, hexadecimal floats); a token that strtod reads only in part
(``1_000``: strtod reads 1, Python's ``float`` 1000) is refused with the line and what strtod would
read, as are tokens without a number and non-finite ones."""

from __future__ import annotations

import ctypes
import re
import struct
import sys

import numpy as np
import pytest

from torch_rankeval import trec

if not sys.platform.startswith("linux"):  # pragma: no cover
    pytest.skip("the oracle is glibc's strtod", allow_module_level=True)

_libc = ctypes.CDLL(None)
_libc.strtod.restype = ctypes.c_double
_libc.strtod.argtypes = [ctypes.c_char_p, ctypes.POINTER(ctypes.c_char_p)]


def strtod(token: bytes) -> tuple[float, int]:
    """The C library's reading of ``token``: (value, bytes consumed)."""
    buf = ctypes.create_string_buffer(token)
    end = ctypes.c_char_p()
    value = _libc.strtod(buf, ctypes.byref(end))
    consumed = ctypes.cast(end, ctypes.c_void_p).value - ctypes.addressof(buf)
    return value, consumed


def _bits(x: float) -> int:
    return struct.unpack("<q", struct.pack("<d", x))[0]


def _read(tmp_path, tokens: list[bytes]):
    path = tmp_path / "run"
    path.write_bytes(b"".join(b"q1 Q0 d%d 1 %s t\n" % (i, t) for i, t in enumerate(tokens)))
    return trec.read_run(path)


WHOLE = [
    b"0.5", b"-1e-3", b"1e5", b"1E+05", b"+.5", b"5.", b"-0", b"-0.0", b"123456789012345678901234567890",
    b"0.1000000000000000055511151231257827", b"2.2250738585072011e-308", b"4.9e-324", b"1e-400",
    b"1.7976931348623157e308", b"9007199254740993", b"0x1p3", b"0X1.8P1", b"-0x.8p-1", b"0x10",
    b"0x1.fffffffffffff7p1023", b"0x1.00000000000008p0", b"0x1.00000000000018p0", b"0x0.0000000000001p-1022",
    b"0x1p-1075", b"0x1.8p-1074", b"00012", b"1e0001",
]  # fmt: skip


def test_whole_numbers_read_as_strtod_reads_them(tmp_path):
    for token in WHOLE:
        value, consumed = strtod(token)
        assert consumed == len(token), token  # the oracle reads it whole
    run = _read(tmp_path, WHOLE)
    order = np.argsort(run.line)
    for token, got in zip(WHOLE, run.score[order].tolist()):
        assert _bits(got) == _bits(strtod(token)[0]), token


PARTIAL = [b"1_000", b"1.5abc", b"1e", b"1e+", b"0x", b"0x1p", b"2,5", b"1..2", b"0x1g", b"5%", b"1d5", b"--1"]


@pytest.mark.parametrize("token", PARTIAL, ids=[t.decode() for t in PARTIAL])
def test_what_strtod_reads_only_in_part_is_refused_naming_what_it_reads(tmp_path, token):
    value, consumed = strtod(token)
    assert 0 < consumed < len(token) or consumed == 0  # the oracle stops early (or reads nothing)
    (tmp_path / "run").write_bytes(b"q1 Q0 a 1 0.5 t\nq1 Q0 b 2 " + token + b" t\n")
    with pytest.raises(trec.TrecFormatError) as caught:
        trec.read_run(tmp_path / "run")
    message = str(caught.value)
    assert f"run, line 2: score {token.decode()!r} is not a number" in message, message
    if consumed:
        assert f"only {token[:consumed].decode()!r}" in message, message


NON_FINITE = [
    b"inf",
    b"-Infinity",
    b"nan",
    b"NaN(123)",
    b"1e400",
    b"0x1p1024",
    b"-0x1p99999",
    b"0x1.fffffffffffff8p1023",
]


@pytest.mark.parametrize("token", NON_FINITE, ids=[t.decode() for t in NON_FINITE])
def test_non_finite_scores_are_refused(tmp_path, token):
    value, consumed = strtod(token)
    assert consumed == len(token) and not np.isfinite(value)  # strtod reads them whole, as inf or nan
    (tmp_path / "run").write_bytes(b"q1 Q0 a 1 " + token + b" t\n")
    with pytest.raises(
        trec.TrecFormatError, match=re.escape(f"line 1: score '{token.decode()}' is not a finite number")
    ):
        trec.read_run(tmp_path / "run")


def test_underscores_among_plain_scores_are_found_in_any_block(tmp_path):
    """One bad token among many good ones (and blocks of other sizes) is found and named."""
    from torch_rankeval.trec._text import read_table

    tokens = [b"%d.25" % i for i in range(300)] + [b"1e-5"] * 10
    tokens[217] = b"1_000"
    path = tmp_path / "run"
    path.write_bytes(b"".join(b"q1 Q0 d%d 1 %s t\n" % (i, t) for i, t in enumerate(tokens)))
    for block in (64, 1 << 20):
        with pytest.raises(trec.TrecFormatError, match="line 218: score '1_000' is not a number"):
            read_table(path, "run", block_bytes=block)
