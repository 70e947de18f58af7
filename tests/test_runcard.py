import time

from raptor.profiles import PROFILES
from raptor.runcard import profile_settings, run_card


def test_run_card_lists_the_run():
    card = run_card(profile="cpu", parameters={"k": 3}, data="d", models=["a", "b"], seeds=[0, 1],
                    started=time.perf_counter())
    rows = card["run card"]
    assert rows["profile"] == "cpu" and rows["parameters"] == "k=3"
    assert rows["models"] == "a; b" and rows["seeds"] == "0, 1"
    assert rows["wall time"].endswith(" s") and "torch" in rows["machine"]


def test_profile_settings_shows_the_profile_and_its_command():
    table = profile_settings("stochastic-depth")["paper profile"]
    for name, value in PROFILES["paper"]["stochastic-depth"].items():
        assert table[name] == repr(value)
    assert "profile" not in table.index
    assert table["command"] == "python -m raptor run --profile paper --chapter stochastic-depth"


def test_profile_settings_notes_a_profile_without_changes():
    table = profile_settings("claims")["paper profile"]
    assert table["note"] == "the paper profile uses the notebook's defaults"
