"""How figures read in reports and on the terminal: formatting only, no figures computed here."""


def fmt(value, digits=1):
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if abs(value) < 1000 or digits else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ms(value):
    return "n/a" if value is None else f"{value:,.0f}"


def percent(ratio):
    return "n/a" if ratio is None else f"{ratio * 100:.1f} %"
