"""LETOR/SVMlight reader and writer: a hand-written file, scikit-learn's SVMlight reader as oracle,
round trips (plain and compressed), chunk boundaries, and malformed lines named by number."""

from __future__ import annotations

import io

import numpy as np
import pytest
import torch

from torch_rankeval.data import QueryDataset, collate_queries, read_letor, synthetic_ltr, write_letor

HAND = """\
# a comment line, then a blank line

2 qid:10 1:0.5 3:-1.25 # docid = GX000-00-0000000 inc = 1
0 qid:10 2:7
1 qid:3 1:1 2:2 3:3 4:4
4 qid:10 4:0.125
0.5 qid:abc-1
"""


def test_hand_written_file():
    data = read_letor(io.StringIO(HAND))
    # queries in order of first appearance; query 10's third document (line 6) joins its group
    assert data.qids == ["10", "3", "abc-1"]
    assert data.offsets.tolist() == [0, 3, 4, 5]
    assert data.target.tolist() == [2.0, 0.0, 4.0, 1.0, 0.5]
    assert torch.equal(
        data.features,
        torch.tensor(
            [
                [0.5, 0.0, -1.25, 0.0],
                [0.0, 7.0, 0.0, 0.0],
                [0.0, 0.0, 0.0, 0.125],
                [1.0, 2.0, 3.0, 4.0],
                [0.0, 0.0, 0.0, 0.0],  # a document without features: all zero
            ]
        ),
    )
    assert data.features.dtype == torch.float32 and data.target.dtype == torch.float32
    batch = collate_queries([data[0], data[1]])
    assert batch["mask"].tolist() == [[True, True, True], [True, False, False]]
    assert batch["target"].tolist() == [[2.0, 0.0, 4.0], [1.0, 0.0, 0.0]]


def test_agrees_with_scikit_learns_svmlight_reader(tmp_path):
    sklearn_datasets = pytest.importorskip("sklearn.datasets")
    g = np.random.default_rng(0)
    lines, qid = [], 0
    for _ in range(400):
        qid += int(g.random() < 0.1)
        cols = np.sort(g.choice(np.arange(1, 31), size=int(g.integers(0, 12)), replace=False))
        feats = " ".join(f"{c}:{g.normal():.6g}" for c in cols)
        lines.append(f"{int(g.integers(0, 5))} qid:{qid} {feats}")
    path = tmp_path / "sparse.txt"
    path.write_text("\n".join(lines) + "\n")
    x, y, q = sklearn_datasets.load_svmlight_file(str(path), query_id=True, n_features=30, dtype=np.float32)
    ours = read_letor(path, n_features=30, chunk_lines=37)  # chunks end mid-query
    assert torch.equal(ours.features, torch.from_numpy(x.toarray()))
    assert torch.equal(ours.target, torch.from_numpy(y.astype(np.float32)))
    assert ours.qids == [str(v) for v in dict.fromkeys(q.tolist())]
    assert torch.equal(ours.list_lengths, torch.from_numpy(np.unique(q, return_counts=True)[1]))


@pytest.mark.parametrize("suffix", [".txt", ".txt.gz", ".txt.bz2", ".txt.xz"])
@pytest.mark.parametrize("sparse", [False, True])
def test_round_trip(tmp_path, suffix, sparse):
    data = synthetic_ltr(12, n_features=9, min_docs=1, max_docs=7, seed=4)
    data.features[data.features.abs() < 0.5] = 0.0  # some zeros for the sparse writer to skip
    path = tmp_path / f"data{suffix}"
    write_letor(path, data, sparse=sparse)
    back = read_letor(path, n_features=9)
    assert torch.equal(back.features, data.features)
    assert torch.equal(back.target, data.target)
    assert torch.equal(back.offsets, data.offsets)
    assert back.qids == data.qids
    if suffix != ".txt":
        assert path.read_bytes()[:2] != b"0 "  # really compressed


def test_chunk_size_does_not_change_the_result():
    text = "".join(f"{i % 3} qid:{i // 4} {i % 5 + 1}:{i}.5\n" for i in range(50))  # widths grow chunk by chunk
    one = read_letor(io.StringIO(text), chunk_lines=1)
    many = read_letor(io.StringIO(text), chunk_lines=7)
    assert torch.equal(one.features, many.features) and one.features.shape == (50, 5)
    assert one.qids == many.qids and torch.equal(one.offsets, many.offsets)


def test_lines_only_the_strict_parser_reads_are_read_the_same():
    """Python accepts '1_0' as 10 where numpy's fast parser does not: the chunk is parsed strictly."""
    data = read_letor(io.StringIO("1 qid:1 1:1_0 2:3\n0 qid:1 1:2\n"))
    assert data.features.tolist() == [[10.0, 3.0], [2.0, 0.0]]


GOOD = "1 qid:1 1:0.5 2:0.25\n0 qid:1 1:0.1\n"


@pytest.mark.parametrize(
    "line, message",
    [
        ("3", "expected '<grade> qid:<query> <index>:<value> ...', got '3'"),
        ("x qid:1 1:0.5", "the grade 'x' is not a number"),
        ("nan qid:1 1:0.5", "the grade 'nan' is not finite"),
        ("1 1:0.5 2:0.1", "the second field must be 'qid:<query id>', got '1:0.5'"),
        ("1 qid: 1:0.5", "the second field must be 'qid:<query id>', got 'qid:'"),
        ("1 qid:1 0.5", "feature '0.5' is not '<index>:<value>'"),
        ("1 qid:1 1:2:3", "feature '1:2:3' is not '<index>:<value>'"),
        ("1 qid:1 a:0.5", "feature index 'a' in 'a:0.5' is not an integer"),
        ("1 qid:1 1.5:0.5", "feature index '1.5' in '1.5:0.5' is not an integer"),
        ("1 qid:1 0:0.5", "feature index 0 is below 1 (indices are 1-based; pass zero_based=True"),
        ("1 qid:1 2:0.5 2:0.7", "feature index 2 appears twice"),
        ("1 qid:1 1:abc", "feature value 'abc' in '1:abc' is not a number"),
        ("1 qid:1 1:inf", "feature value 'inf' in '1:inf' is not finite"),
        ("1 qid:1 1:", "feature value '' in '1:' is not a number"),
    ],
)
def test_malformed_line_is_rejected_with_its_number(line, message):
    text = GOOD + "# comment\n" + line + "\n" + GOOD
    for chunk_lines in (1, 1000):  # the error is the same whichever parser met it
        with pytest.raises(ValueError) as info:
            read_letor(io.StringIO(text), chunk_lines=chunk_lines)
        assert str(info.value).startswith(f"<lines>, line 4: {message}")


def test_error_names_the_file_and_a_line_in_a_later_chunk(tmp_path):
    path = tmp_path / "bad.txt.gz"
    import gzip

    with gzip.open(path, "wt") as f:
        f.write(GOOD * 10 + "1 qid:1 1:0.5 99999999:1\n")
    with pytest.raises(ValueError, match=r"bad\.txt\.gz, line 21: feature index 99999999 is beyond the supported"):
        read_letor(path, chunk_lines=4)
    with pytest.raises(ValueError, match=r"line 2: feature index 3 is beyond n_features=2"):
        read_letor(io.StringIO("1 qid:1 1:1\n1 qid:1 3:1\n"), n_features=2)


def test_zero_based_and_width_options():
    data = read_letor(io.StringIO("1 qid:a 0:1 2:3\n"), zero_based=True)
    assert data.features.tolist() == [[1.0, 0.0, 3.0]]
    wide = read_letor(io.StringIO("1 qid:a 1:1\n"), n_features=4)
    assert wide.features.tolist() == [[1.0, 0.0, 0.0, 0.0]]
    empty = read_letor(io.StringIO("# nothing\n\n"))
    assert len(empty) == 0 and empty.features.shape == (0, 0)


def test_bad_arguments_and_sources():
    with pytest.raises(ValueError, match="n_features must be a positive int"):
        read_letor(io.StringIO(GOOD), n_features=0)
    with pytest.raises(ValueError, match="chunk_lines must be a positive int"):
        read_letor(io.StringIO(GOOD), chunk_lines=0)
    with pytest.raises(TypeError, match="read_letor reads text"):
        read_letor([b"1 qid:1 1:1\n"])
    data = QueryDataset(torch.zeros(1, 1), torch.zeros(1), torch.tensor([0, 1]), ["has space"])
    with pytest.raises(ValueError, match="query id 'has space' cannot be written"):
        write_letor(io.StringIO(), data)


def test_query_dataset_checks_and_padding():
    with pytest.raises(ValueError, match="offsets must start at 0, end at the number of documents"):
        QueryDataset(torch.zeros(3, 2), torch.zeros(3), torch.tensor([0, 2]))
    with pytest.raises(ValueError, match="target must hold one grade per document"):
        QueryDataset(torch.zeros(3, 2), torch.zeros(2), torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="qids must have one id per query"):
        QueryDataset(torch.zeros(3, 2), torch.zeros(3), torch.tensor([0, 3]), ["a", "b"])
    data = synthetic_ltr(6, n_features=3, min_docs=1, max_docs=5, seed=2)
    padded, collated = data.padded(), collate_queries([data[i] for i in range(len(data))])
    for key in padded:
        assert torch.equal(padded[key], collated[key])
    assert torch.equal(data[-1]["features"], data[5]["features"])
    with pytest.raises(IndexError):
        data[6]
