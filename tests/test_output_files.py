"""Where reports are written: standard output, regular files atomically, special files through, bad targets
refused before any work (issue: bugs from hostile-input testing)."""

import os
import stat
import threading

import pytest

from memgraph import cli
from memgraph.errors import MemgraphError
from memgraph.output import check_output_path, write_output

MLP = ["analyze", "tests.fixtures.nets:mlp", "--input", "x=float32[4,16]", "--target", "cpu", "-f", "json"]


def test_a_fifo_is_written_through_not_replaced(tmp_path):
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(fifo).read()))
    reader.start()
    write_output("report\n", str(fifo))
    reader.join(5)
    assert got == ["report\n"]
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)  # still the FIFO, not a regular file put in its place


def test_a_symbolic_link_stays_a_link_and_its_file_is_replaced(tmp_path):
    real = tmp_path / "real.md"
    real.write_text("old")
    os.chmod(real, 0o640)
    link = tmp_path / "link.md"
    link.symlink_to(real)
    write_output("new", str(link))
    assert link.is_symlink() and real.read_text() == "new"
    assert stat.S_IMODE(real.stat().st_mode) == 0o640  # the replaced file keeps its mode
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.md", "real.md"]  # no temporary left


def test_dash_means_standard_output(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert cli.main(MLP + ["-o", "-"]) == 0
    assert capsys.readouterr().out.startswith("{")
    assert not (tmp_path / "-").exists()


def test_a_missing_folder_is_refused_before_the_analysis(tmp_path, monkeypatch, capsys):
    def no_trace(*a, **k):
        raise AssertionError("the analysis ran although the output folder does not exist")

    monkeypatch.setattr("memgraph.api.analyze", no_trace)
    assert cli.main(MLP + ["-o", str(tmp_path / "nope" / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "folder" in err and "does not exist" in err


@pytest.mark.parametrize("target, message", [("", "--output is empty"), (".", "it is a folder"),
                                             ("DIR", "it is a folder")])
def test_folders_and_empty_names_are_clear_errors(tmp_path, target, message):
    with pytest.raises(MemgraphError, match=message):
        check_output_path(str(tmp_path) if target == "DIR" else target)


def test_a_name_near_the_255_byte_limit_works(tmp_path):
    name = "r" * 250 + ".json"  # 255 bytes: legal; a temporary name derived from it would not be
    write_output("{}", str(tmp_path / name))
    assert (tmp_path / name).read_text() == "{}"


def test_a_new_file_gets_the_usual_mode(tmp_path):
    mask = os.umask(0o022)
    try:
        write_output("x", str(tmp_path / "r.md"))
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "r.md").stat().st_mode) == 0o644
