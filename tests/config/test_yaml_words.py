"""YAML 1.1 reads a bare ``off``/``no`` as false (``on``/``yes`` as true): where the schema
means the word, the loader takes the word back, through check-config as anywhere."""

from __future__ import annotations

from typer.testing import CliRunner

from tokenward.cli.main import app
from tokenward.config import parse_config

POLICY = """
screening:
  policies:
    quiet:
      pii: {{mode: {mode}, output: {output}}}
"""


def test_off_means_off_where_the_schema_means_the_word():
    cfg = parse_config(POLICY.format(mode="off", output="off"), environ={})
    pii = cfg.screening.policies["quiet"].pii
    assert (pii.mode, pii.output) == ("off", "off")


def test_a_boolean_where_no_word_fits_is_still_refused_by_check_config(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text(POLICY.format(mode="on", output="off"))
    result = CliRunner().invoke(app, ["check-config", str(path)])
    assert result.exit_code == 2
    assert "screening.policies.quiet.pii.mode: expected one of 'off', 'log', 'block', 'redact', 'tokenize', got True" \
        in result.output
    path.write_text(POLICY.format(mode="off", output="off"))
    assert CliRunner().invoke(app, ["check-config", str(path)]).exit_code == 0
