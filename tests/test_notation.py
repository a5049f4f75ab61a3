"""The report's notation: the papers' indices drawn as sub- and superscripts, numbers never split by
a line break, long runs given break points at their punctuation, and escaping kept throughout."""

from privaudit.reports.notation import html_text, unicode_text, verbatim


def test_indices_become_html_sub_and_superscripts():
    assert html_text("noisy state y_{i,1}") == "noisy state y<sub>i,1</sub>"
    assert html_text("‖x_i^k‖_∞") == "‖x<sub>i</sub><sup>k</sup>‖<sub>∞</sub>"
    assert html_text("Π_{t=l+1}^{k−1} β_t") == "Π<sub>t=l+1</sub><sup>k−1</sup> β<sub>t</sub>"
    assert html_text("(√(Σ_{j∈N_i} c^{ij})") == "(√(Σ<sub>j∈N<sub>i</sub></sub> c<sup>ij</sup>)"


def test_identifiers_and_plain_words_are_left_alone():
    assert html_text("cross_gradient: 4800, self_gradient") == "cross_gradient: 4800, self_gradient"
    assert html_text("a_b_c and snake_case_name") == "a_b_c and snake_case_name"


def test_everything_is_escaped_before_any_markup_is_added():
    assert html_text("<b> x_i </b> & y") == "&lt;b&gt; x<sub>i</sub> &lt;/b&gt; &amp; y"
    assert "<img" not in html_text('<img src=x onerror="a_1">')


def test_numbers_in_scientific_notation_are_unbreakable():
    assert html_text("δ 1e-05 and 2.981e-06") == ('δ <span class="nb">1e-05</span> and '
                                                   '<span class="nb">2.981e-06</span>')
    assert html_text("0.25") == "0.25"


def test_a_long_run_breaks_at_its_punctuation_and_a_blob_anywhere():
    assert html_text("privaudit/attacks/audit/verdict.py") == "privaudit/<wbr>attacks/<wbr>audit/<wbr>verdict.py"
    assert html_text("x=1,000,000,and_more") == "x=<wbr>1,000,000,<wbr>and_more"  # no break inside 1,000,000
    blob = "bf954bec24421ad8bf954bec24421ad8"
    assert html_text(blob) == f'<span class="long">{blob}</span>'
    assert html_text("short=1,2") == "short=1,2"  # below LONG_RUN: nothing added


def test_verbatim_text_is_escaped_and_nothing_else():
    assert verbatim("x_i 1e-05 <b>") == "x_i 1e-05 &lt;b&gt;"
    assert html_text(verbatim("x_i")) == "x_i"


def test_figures_get_unicode_indices_where_every_character_has_one():
    assert unicode_text("y_{i,1}") == "yᵢ,₁"
    assert unicode_text("x_i^k and λ^k") == "xᵢᵏ and λᵏ"
    assert unicode_text("Σ_{j∈N_i}") == "Σ_(j∈Nᵢ)"  # ∈ has no subscript form: plain, without braces
    assert unicode_text("cross_gradient") == "cross_gradient"
