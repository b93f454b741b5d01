"""How figures read in reports and on the terminal: formatting only, no figures computed here."""


def fmt(value: object, digits: int = 1) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float):
        return f"{value:,.{digits}f}" if abs(value) < 1000 or digits else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ms(value: float | None) -> str:
    return "n/a" if value is None else f"{value:,.0f}"


def percent(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio * 100:.1f} %"
