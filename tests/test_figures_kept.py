"""A report's figures are drawn once per content in a process (`privaudit.reports.figures.kept`):
the same data gives the same PNG without drawing again, and any difference in the data, its order
or its types draws a new one."""

from collections import OrderedDict

from privaudit.reports import figures


def test_a_figure_of_the_same_data_is_drawn_once_and_of_other_data_again(monkeypatch):
    drawn = []
    to_data_uri = figures.to_data_uri
    monkeypatch.setattr(figures, "to_data_uri", lambda figure: drawn.append(figure) or to_data_uri(figure))
    monkeypatch.setattr(figures, "_DRAWN_FIGURES", OrderedDict())
    first = figures.audit_curve([(10, 0.5), (100, 0.7)], {"claimed": 2.0}, "ε", "bound")
    assert figures.audit_curve([(10, 0.5), (100, 0.7)], {"claimed": 2.0}, "ε", "bound") == first
    assert len(drawn) == 1
    other = figures.audit_curve([(10, 0.5), (100, 0.8)], {"claimed": 2.0}, "ε", "bound")
    assert other != first and len(drawn) == 2
    assert figures.audit_curve([(10, 0.5), (100, 0.8)], {"claimed": 2.0, "sound": 1.0}, "ε", "bound") != other
    assert len(drawn) == 3


def test_only_plain_data_of_the_same_types_and_order_is_the_same_content():
    content = figures._content
    assert content({"a": [1, 2.5, None, "x"]}) == content({"a": [1, 2.5, None, "x"]})
    assert content([1]) != content((1,)) and content(1) != content(1.0) and content(True) != content(1)
    assert content(-0.0) != content(0.0) and content(float("nan")) == content(float("nan"))
    assert content({"a": 1, "b": 2}) != content({"b": 2, "a": 1})  # a legend's order is drawn
    assert content({"a": object()}) is None and content([[object()]]) is None
