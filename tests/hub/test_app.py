"""The composition root: an optional part that cannot load is logged with its cause, never dropped quietly."""

from __future__ import annotations

import logging
import sys

import pytest

from scopehub.hub.app import build_hub, build_model
from scopehub.hub.errors import ModelNotConfigured
from scopehub.hub.models.testing import ScriptedModel
from scopehub.hub.settings import load_settings


def records_of(caplog: pytest.LogCaptureFixture, level: int) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.name == "scopehub.hub.app" and r.levelno == level]


def logged_once(caplog: pytest.LogCaptureFixture, level: int) -> logging.LogRecord:
    records = records_of(caplog, level)
    assert len(records) == 1, f"expected one {logging.getLevelName(level)} from the composition root, got {[r.getMessage() for r in records]}"
    return records[0]


def test_facts_are_on_when_their_module_imports(tmp_path, caplog):
    hub = build_hub(load_settings(db=tmp_path / "hub.db"), model=ScriptedModel(default="ok"))
    assert hub.deps.facts is not None
    assert records_of(caplog, logging.ERROR) == []


def test_a_broken_facts_import_is_logged_with_its_cause(tmp_path, monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "scopehub.hub.facts", None)  # `from scopehub.hub.facts import ...` fails
    hub = build_hub(load_settings(db=tmp_path / "hub.db"), model=ScriptedModel(default="ok"))
    assert hub.deps.facts is None  # the bot still answers, without persistent facts...
    record = logged_once(caplog, logging.ERROR)  # ...and says so, with the traceback
    assert "persistent facts are off" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], ImportError)
    assert "scopehub.hub.facts" in caplog.text


def test_a_broken_embedded_model_module_is_logged_with_its_cause(monkeypatch, caplog):
    monkeypatch.setitem(sys.modules, "scopehub.hub.models.local", None)
    assert build_model(load_settings(), required=False) is None
    record = logged_once(caplog, logging.ERROR)
    assert "the embedded model is off" in record.getMessage()
    assert record.exc_info is not None and isinstance(record.exc_info[1], ImportError)
    with pytest.raises(ModelNotConfigured, match=r"embedded model: scopehub.hub.models.local cannot be imported"):
        build_model(load_settings())


def test_an_installed_but_broken_embedded_model_says_why(monkeypatch, caplog):

    from scopehub.hub.models.engine import XLlamaEngine
    from scopehub.hub.models.local import LocalModel

    def broken(*args, **options):
        try:
            raise OSError("xllamacpp.abi3.so: cannot open shared object file")
        except OSError as exc:
            raise ModelNotConfigured(f"xllamacpp is installed but cannot load ({exc})") from exc

    monkeypatch.setattr(LocalModel, "from_package", staticmethod(broken))
    monkeypatch.setattr(XLlamaEngine, "available", staticmethod(lambda: None))  # installed, but broken
    with pytest.raises(ModelNotConfigured, match=r"no model configured.*embedded model: xllamacpp is installed but cannot load \(xllamacpp.abi3.so"):
        build_model(load_settings())
    record = logged_once(caplog, logging.WARNING)
    assert record.exc_info is not None and isinstance(record.exc_info[1].__cause__, OSError)
