"""Bad input to `nightly` and `compare` is exit 2 with a message naming it, checked before anything is built,
measured or written: no machine registered, no build started, no committed file rewritten."""

from __future__ import annotations

import json

import pytest

from tierbench.suite.history import compare_command, nightly_command


@pytest.fixture
def guarded(project, monkeypatch):
    """The project with committed-looking definitions, and a HOME that asv would register machines in."""
    home = project.parent / f"{project.name}-home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    definitions = project / "results" / "asv" / "benchmarks.json"
    definitions.parent.mkdir(parents=True)
    definitions.write_text(json.dumps({"version": 2}))
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    return project, home, before


def _refused(main, argv, capsys) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    err = capsys.readouterr().err
    assert exited.value.code == 2 and "Traceback" not in err
    return err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--head", "--machine", "../../x"], "'../../x' is not a machine name"),
        (["--head", "--machine", "a/b"], "is not a machine name"),
        (["--commits", ""], "give a range A..B or a comma-separated list"),
        (["--commits", " , "], "give a range A..B or a comma-separated list"),
        (["--head", "--aa", "-1"], "argument --aa: -1 is below 0"),
        (["--head", "--rounds", "-3"], "argument --rounds: -3 is below 3"),
        (["--head", "--rounds", "many"], "'many' is not a whole number"),
    ],
)
def test_nightly_refuses_bad_input_before_doing_anything(guarded, capsys, args, message):
    project, home, before = guarded
    err = _refused(nightly_command.main, ["--config", str(project / "asv.conf.json"), *args], capsys)
    assert message in err
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before  # nothing built or rewritten
    assert json.loads((project / "results" / "asv" / "benchmarks.json").read_text()) == {"version": 2}
    assert not (home / ".asv-machine.json").exists() and not (project / "x").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["a", "b", "--rounds", "-3"], "argument --rounds: -3 is below 3"),
        (["a", "b", "--machine", "../x"], "is not a machine name"),
        (["--learn-noise", "HEAD", "--runs", "0"], "argument --runs: 0 is below 1"),
    ],
)
def test_compare_refuses_bad_input_before_doing_anything(guarded, capsys, args, message):
    project, home, before = guarded
    err = _refused(compare_command.main, ["--config", str(project / "asv.conf.json"), *args], capsys)
    assert message in err
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before


def test_validate_refuses_an_unwritable_json_path(guarded, capsys):
    project, _, before = guarded
    code = compare_command.main(["--config", str(project / "asv.conf.json"), "--validate", "--json", "/proc/x/v.json"])
    err = capsys.readouterr().err
    assert code == 2 and "--json /proc/x/v.json" in err and "Traceback" not in err
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before


@pytest.mark.parametrize("args", [[], ["--commits", "HEAD~1..HEAD"]])
def test_a_nightly_of_asvs_own_builds_is_refused_where_the_config_measures_in_this_python(guarded, capsys, args):
    """A plugin's repository (examples/plugin/asv.conf.json) measures in the Python that runs asv: asv builds
    no commit there, so only --head and --commits ... --existing-env can measure one."""
    project, home, _ = guarded
    config = project / "asv.conf.json"
    config.write_text(json.dumps({**json.loads(config.read_text()), "environment_type": "existing"}))
    before = sorted(p.relative_to(project) for p in project.rglob("*"))
    code = nightly_command.main(["--config", str(config), *args])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert '"environment_type": "existing"' in err and "give --head" in err and "--existing-env" in err
    assert sorted(p.relative_to(project) for p in project.rglob("*")) == before
    assert not (home / ".asv-machine.json").exists()
