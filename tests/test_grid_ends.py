"""A setting at an end of the values it was tuned over: one test and one phrase for every claim's evidence."""

from paperlib.experiments.common.grid_ends import grid_end, not_bracketed


def test_a_value_at_or_past_an_end_of_two_or_more_values_is_at_that_end():
    assert grid_end(0.1, [0.01, 0.05, 0.1]) == "largest"
    assert grid_end(0.01, [0.1, 0.01, 0.05]) == "smallest"  # order does not matter
    assert grid_end(0.05, [0.01, 0.05, 0.1]) is None
    assert grid_end(0.2, (0.001, 0.1)) == "largest" and grid_end(0.0, (0.001, 0.1)) == "smallest"  # a range's ends
    assert grid_end(0.1, [0.1, 0.1]) is None and grid_end(0.1, []) is None  # nothing was bracketed or tried


def test_the_phrase_names_the_end_and_the_values():
    assert not_bracketed(0.1, [0.05, 0.01, 0.1]) == "0.1 (the largest of 0.01–0.1 tried: optimum not bracketed)"
    assert not_bracketed(0, (0, 0.5), "allowed") == "0 (the smallest of 0–0.5 allowed: optimum not bracketed)"
    assert not_bracketed(0.05, [0.01, 0.05, 0.1]) == ""
    assert not_bracketed(0.2, (0.001, 0.1), "allowed") == ("0.2 (above the largest of 0.001–0.1 allowed: optimum "
                                                           "not bracketed)")
    assert not_bracketed(-20, (-20, 100), "allowed") == ("-20 (the smallest of -20 to 100 allowed: optimum not "
                                                         "bracketed)")
