"""The /debug page as text: the policy's hashes are those of the page's own style sheet and
script, a long problem shows its start and the rest on demand, each problem in the picture
links to its row, and `?refresh=N` sets the period (0: not until the box is ticked)."""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import re

from dragoman.dag.model import Problem
from dragoman.objects import ObjectKey
from dragoman.runtime.debug.pages import CONTENT_SECURITY_POLICY, SHORT_MESSAGE, page
from dragoman.runtime.debug.view import DebugView
from tests.support.feature_manifests import every_feature_dag


def _hash(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"


def test_the_policy_allows_exactly_the_inline_style_and_script_of_the_page() -> None:
    _, html = page(DebugView(dag=every_feature_dag()), {})
    (style,) = re.findall(r"<style>(.*?)</style>", html, re.S)
    (script,) = re.findall(r"<script>(.*?)</script>", html, re.S)
    assert f"style-src {_hash(style)};" in CONTENT_SECURITY_POLICY
    assert f"script-src {_hash(script)};" in CONTENT_SECURITY_POLICY
    assert "unsafe" not in CONTENT_SECURITY_POLICY
    assert "style=" not in html  # no inline style attribute the policy would refuse


def test_a_long_problem_shows_its_start_and_the_rest_on_demand() -> None:
    dag = every_feature_dag()
    long = Problem(ObjectKey("HTTPRoute", "default", "long"), "spec", "Invalid", "x" * 400)
    view = DebugView(dag=dataclasses.replace(dag, problems=(*dag.problems, long)))
    _, html = page(view, {})
    row = re.search(
        r'<tr id="(problem-[0-9a-f]{12})"><td>HTTPRoute/default/long</td>.*?</tr>', html
    )
    assert row is not None
    assert f'<details id="{row.group(1)}-text"><summary>{"x" * (SHORT_MESSAGE - 1)}…' in row.group()
    assert "x" * 400 in row.group()
    # Its line in the picture, cut to fit, links to the row and carries the whole text.
    assert f'<a href="#{row.group(1)}"><text' in html
    assert f"<title>spec: {'x' * 400} (Invalid)</title>" in html


def test_the_refresh_period_comes_from_the_query() -> None:
    view = DebugView()
    _, default = page(view, {})
    assert 'data-refresh="5"' in default and 'id="refresh" checked>' in default
    _, slower = page(view, {"refresh": "30"})
    assert 'data-refresh="30"' in slower and "refresh every 30 s" in slower
    _, stopped = page(view, {"refresh": "0"})
    assert 'id="refresh">' in stopped  # not ticked
    _, nonsense = page(view, {"refresh": "soon"})
    assert 'data-refresh="5"' in nonsense
