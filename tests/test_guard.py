"""The plugin guard's verdicts on what plugin code returns or raises (``call``)."""

from __future__ import annotations

import pytest

from hwbackends._base import guard


def _raise(exc: BaseException) -> None:
    raise exc


def test_a_fault_raised_by_hwbackends_checks_inside_the_call_is_kept_as_it_is() -> None:
    """hwbackends' own result checks run inside the call and raise PluginFault with the whole
    reason: it must reach the caller unchanged, not as "raised PluginFault: ..."."""
    with pytest.raises(guard.PluginFault) as caught:
        guard.call("acme.probe()", lambda: _raise(guard.PluginFault("acme.probe() returned 3")))
    assert caught.value.reason == "acme.probe() returned 3"


def test_a_result_error_is_the_whole_reason_and_other_exceptions_name_the_call() -> None:
    with pytest.raises(guard.PluginFault) as checked:
        guard.call("acme.devices()", lambda: _raise(guard.ResultError("devices() must be a list")))
    assert checked.value.reason == "devices() must be a list" and checked.value.tb is None
    with pytest.raises(guard.PluginFault) as raised:
        guard.call("acme.devices()", lambda: _raise(OSError("no /dev/acme0")))
    assert raised.value.reason == "acme.devices() raised OSError: no /dev/acme0"
    assert raised.value.tb is not None and "OSError: no /dev/acme0" in raised.value.tb


def test_passthrough_exceptions_propagate_as_they_are() -> None:
    with pytest.raises(KeyError):
        guard.call("acme.probe()", lambda: _raise(KeyError("x")), passthrough=(KeyError,))


@pytest.mark.parametrize("timeout", [0, 5])
def test_a_value_comes_back_inline_or_from_a_worker(timeout: float) -> None:
    assert guard.call("acme.probe()", lambda: 42, timeout=timeout) == 42


def test_no_limit_runs_a_batch_inline_and_waits_for_every_call() -> None:
    """HWBACKENDS_TIMEOUT=0: no limit. A call that takes a while still comes back with its
    value (a zero limit must not turn into an immediate "did not return")."""
    import threading

    def slow() -> str:
        threading.Event().wait(0.2)
        return "done"

    assert guard.call_many([("a.probe()", slow), ("b.probe()", slow)], timeout=0) == [
        (True, "done"),
        (True, "done"),
    ]


def test_each_call_of_a_batch_has_its_own_limit() -> None:
    """Four calls of 0.4 s under a 1 s limit all succeed although the batch takes 1.6 s: the
    limit is per call, measured from when that call started."""
    import threading

    def slow() -> str:
        threading.Event().wait(0.4)
        return "done"

    got = guard.call_many([(f"p{i}.probe()", slow) for i in range(4)], timeout=1.0)
    assert got == [(True, "done")] * 4


def test_a_long_exception_message_is_cut_at_500_characters() -> None:
    assert guard.describe(ValueError("x" * 600)) == "ValueError: " + "x" * 500 + "…"
    assert guard.describe(ValueError("x" * 500)) == "ValueError: " + "x" * 500
    assert guard.describe(ValueError()) == "ValueError"


@pytest.mark.parametrize(("raw", "seconds"), [("", 30.0), ("0", 0.0), ("off", 0.0), ("None", 0.0),
                                              ("2.5", 2.5)])  # fmt: skip
def test_the_time_limit_setting(raw: str, seconds: float) -> None:
    assert guard.timeout_from({"HWBACKENDS_TIMEOUT": raw}) == seconds


def test_a_variable_put_back_by_the_plugin_is_no_change(monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    monkeypatch.setenv("HWB_GUARD_SAME", "before")

    def plugin() -> str:
        os.environ["HWB_GUARD_SAME"] = "during"
        os.environ["HWB_GUARD_SAME"] = "before"  # restored: nothing changed for the caller
        return "ok"

    assert guard.call("acme.probe()", plugin, timeout=5) == "ok"


@pytest.mark.parametrize("timeout", [0, 5])
def test_after_a_call_the_caller_is_not_running_plugin_code(timeout: float) -> None:
    inside: list[bool] = []
    guard.call("acme.probe()", lambda: inside.append(guard.running_plugin_code()), timeout=timeout)
    assert inside == [True]
    assert guard.running_plugin_code() is False
