"""Units as reports print them: one rule per unit."""

from pipecheck.units import ms, nbytes, p_value, rate


def test_units():
    assert ms(0.0123) == "12.3 ms"
    assert ms(0.00123) == "1.23 ms"
    assert ms(2.5) == "2.50 s"
    assert ms(None) == "-" and ms(float("nan")) == "-"
    assert rate(15290.0, "tok/s") == "15.29 ktok/s"
    assert nbytes(10 * 1024 * 1024) == "10.0 MiB"


def test_one_rule_for_durations_and_p_values():
    assert ms(0.0283, signed=True) == "+28.3 ms" and ms(-0.00123, signed=True) == "-1.23 ms"
    assert ms(-41.528, signed=True) == "-41.53 s" and ms(41.73) == "41.73 s"
    assert p_value(0.0000123) == "p<0.001" and p_value(0.0421) == "p=0.042"
    assert p_value(None) == "p=?" and p_value(float("nan")) == "p=?"
