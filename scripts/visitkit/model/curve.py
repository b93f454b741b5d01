"""Cost at the user's own traffic: each iteration's monthly bill and cost per million visits from LOWEST_RATE
visits/s to its knee (cost.monthly_at: request-based billing by occupancy, the pull store always on, the free tiers
when asked), where the iterations' bills cross (break-even rates), and from which rate one costs at most a given
share of another. `scripts/predict ITERATION... --cost-curve` writes them (write_curves: a table, a plot, a JSON
record every renderer reads)."""
import itertools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from visitkit.model import capacity, cost
from visitkit.settings import Settings

LOWEST_RATE = 0.1  # visits/s: a small site's day, a few thousand visits
POINTS = 48  # rates per curve, evenly spaced on a log scale
MARKS = (0.1, 1, 10, 100, 1000)  # the table's rates, priced exactly (a curve holds those below its knee)
FORMAT = 1  # curves.json's format: a change to its fields bumps it


@dataclass(frozen=True)
class Priced:
    """One iteration as the curve prices it."""
    name: str
    settings: Settings
    prediction: capacity.Prediction

    @property
    def knee(self) -> float:
        return self.prediction.knee_visits_per_s

    def monthly(self, visits_per_s: float, prices: Mapping[str, Any], region: str, free_tier: bool) -> float:
        return cost.monthly_at(self.settings, self.prediction, visits_per_s, prices, region, free_tier)["total"]


@dataclass(frozen=True)
class Point:
    visits_per_s: float
    monthly_usd: float
    per_million_usd: float


@dataclass(frozen=True)
class Crossing:
    """Where `cheaper_above` becomes the cheaper of two iterations (its bill below the other's above this rate),
    within the rates both hold."""
    cheaper_above: str
    other: str
    visits_per_s: float
    monthly_usd: float


def rates(knee: float, points: int = POINTS, lowest: float = LOWEST_RATE) -> list[float]:
    """`points` rates from `lowest` to the knee, evenly spaced on a log scale (the knee itself last)."""
    if knee <= lowest:
        return [knee]
    step = math.log(knee / lowest) / (points - 1)
    return [lowest * math.exp(step * i) for i in range(points - 1)] + [knee]


def per_million(monthly_usd: float, visits_per_s: float) -> float:
    return monthly_usd / (visits_per_s * cost.MONTH_S / cost.MILLION)


def curve(priced: Priced, prices: Mapping[str, Any], region: str, free_tier: bool = False) -> list[Point]:
    """The iteration's bill along rates() and at the MARKS below its knee, in order of rate."""
    points = []
    for rate in sorted({*rates(priced.knee), *(mark for mark in MARKS if mark < priced.knee)}):
        monthly = priced.monthly(rate, prices, region, free_tier)
        points.append(Point(rate, monthly, per_million(monthly, rate)))
    return points


def first_rate_where(holds: Callable[[float], bool], low: float, high: float) -> float | None:
    """The lowest rate in [low, high] from which `holds` stays true (scanning the log grid, then bisecting the last
    change on a log scale), or None if it is false at `high`."""
    grid = rates(high, POINTS * 2, low)
    if not holds(grid[-1]):
        return None
    below = next((rate for rate in reversed(grid) if not holds(rate)), None)
    if below is None:
        return grid[0]
    above = grid[grid.index(below) + 1]
    for _ in range(40):
        middle = math.sqrt(below * above)
        below, above = (below, middle) if holds(middle) else (middle, above)
    return above


def crossings(a: Priced, b: Priced, prices: Mapping[str, Any], region: str, free_tier: bool = False) -> list[Crossing]:
    """Each rate at which a's and b's monthly bills cross, within the rates both hold, found on the log grid and
    bisected: none when one is cheaper all along."""
    high = min(a.knee, b.knee)
    grid = rates(high, POINTS * 2)

    def gap(rate: float) -> float:
        return a.monthly(rate, prices, region, free_tier) - b.monthly(rate, prices, region, free_tier)

    found = []
    for low, up in zip(grid, grid[1:]):
        if (gap(low) > 0) == (gap(up) > 0):
            continue
        lo, hi = low, up
        for _ in range(40):
            middle = math.sqrt(lo * hi)
            lo, hi = (middle, hi) if (gap(middle) > 0) == (gap(low) > 0) else (lo, middle)
        cheaper = a if gap(up) < 0 else b
        found.append(Crossing(cheaper.name, (b if cheaper is a else a).name, hi,
                              a.monthly(hi, prices, region, free_tier)))
    return found


def ratio_from(a: Priced, b: Priced, ratio: float, prices: Mapping[str, Any], region: str,
               free_tier: bool = False) -> float | None:
    """The lowest rate from which a costs at most `ratio` x b a month at the same rate, up to the lower knee (None:
    not even there)."""
    return first_rate_where(lambda rate: a.monthly(rate, prices, region, free_tier)
                            <= ratio * b.monthly(rate, prices, region, free_tier),
                            LOWEST_RATE, min(a.knee, b.knee))


def record(curves: Mapping[str, list[Point]], found: Sequence[Crossing], priced: Sequence[Priced],
           region: str, free_tier: bool, prices: Mapping[str, Any]) -> dict[str, Any]:
    """curves.json's content: the curves, the crossings and what they were priced with."""
    return {"format": FORMAT, "region": region, "free_tier": free_tier, "prices_as_of": prices["as_of"],
            "currency": prices["currency"], "profile": priced[0].prediction.profile if priced else None,
            "iterations": {p.name: {"knee_visits_per_s": p.knee, "points": [asdict(point) for point in curves[p.name]]}
                           for p in priced},
            "crossings": [asdict(c) for c in found]}


def table_lines(data: Mapping[str, Any]) -> list[str]:
    """The record as a Markdown table: each iteration's bill a month at a few rates, its knee, then the crossings."""
    names = list(data["iterations"])
    currency = data["currency"]
    lines = [f"| visits/s | {' | '.join(names)} |", f"|---:|{'---:|' * len(names)}"]
    for mark in MARKS:
        cells = []
        for name in names:
            found = next((point for point in data["iterations"][name]["points"] if point["visits_per_s"] == mark),
                         None)
            cells.append("beyond its knee" if found is None else
                         f"{found['monthly_usd']:,.2f} a month ({found['per_million_usd']:,.2f} a million)")
        lines.append(f"| {mark:g} | {' | '.join(cells)} |")
    knees = [f"{data['iterations'][name]['knee_visits_per_s']:,.0f}" for name in names]
    lines.append(f"| knee | {' | '.join(knees)} |")
    lines.append("")
    for c in data["crossings"]:
        lines.append(f"- {c['cheaper_above']} is cheaper than {c['other']} above {c['visits_per_s']:,.1f} visits/s "
                     f"({c['monthly_usd']:,.2f} {currency} a month each there)")
    if not data["crossings"]:
        lines.append("- no two of these iterations' bills cross below their knees")
    return lines


def same_points(found: Sequence[Mapping[str, Any]]) -> dict[tuple[str, float, float], list[str]]:
    """The crossings grouped where one iteration crosses several at one point (to a tenth of a visit/s, as labelled):
    {(cheaper_above, rate, monthly USD): [the others]}."""
    grouped: dict[tuple[str, float, float], list[str]] = {}
    for c in found:
        key = next((k for k in grouped if k[0] == c["cheaper_above"] and round(k[1], 1) == round(c["visits_per_s"], 1)),
                   (c["cheaper_above"], c["visits_per_s"], c["monthly_usd"]))
        grouped.setdefault(key, []).append(c["other"])
    return grouped


def plot(data: Mapping[str, Any], path: Path) -> None:
    """Two panels over visits/s (log scales): the bill a month, the cost per million visits; each curve stops at
    its knee (marked x), each crossing marked o."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (month, million) = plt.subplots(2, 1, figsize=(9, 8), sharex=True)
    for (name, found), style in zip(data["iterations"].items(), itertools.cycle(("-", "--", "-.", ":"))):
        rate = [p["visits_per_s"] for p in found["points"]]
        line, = month.plot(rate, [p["monthly_usd"] for p in found["points"]], style, label=name)
        million.plot(rate, [p["per_million_usd"] for p in found["points"]], style, color=line.get_color())
        month.plot(rate[-1], found["points"][-1]["monthly_usd"], "x", color=line.get_color(), markersize=9)
        million.plot(rate[-1], found["points"][-1]["per_million_usd"], "x", color=line.get_color(), markersize=9)
    for (cheaper, where, usd), others in same_points(data["crossings"]).items():
        month.plot(where, usd, "o", color="black", markersize=5)
        month.annotate(f"{cheaper} < {', '.join(others)}\nabove {where:,.1f}/s", (where, usd), xytext=(4, -18),
                       textcoords="offset points", fontsize=7)
    tier = ", free tiers taken off" if data["free_tier"] else ", list prices"
    month.set(xscale="log", yscale="log", ylabel=f"{data['currency']} a month",
              title=f"Cost at a steady traffic in {data['region']}{tier} (x: the knee, o: break-even)")
    million.set(xscale="log", yscale="log", xlabel="visits/s", ylabel=f"{data['currency']} per million visits")
    month.legend(fontsize=8)
    for axes in (month, million):
        axes.grid(True, which="both", alpha=0.3)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def write_curves(folder: Path, priced: Sequence[Priced], prices: Mapping[str, Any], region: str,
                 free_tier: bool = False) -> dict[str, Any]:
    """Price `priced` along their curves, find the crossings of each pair, and write curves.json, curves.md and
    curves.png into `folder`; returns the record."""
    curves = {p.name: curve(p, prices, region, free_tier) for p in priced}
    found = [crossing for i, a in enumerate(priced) for b in priced[i + 1:]
             for crossing in crossings(a, b, prices, region, free_tier)]
    data = record(curves, found, priced, region, free_tier, prices)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "curves.json").write_text(json.dumps(data, indent=1) + "\n")
    (folder / "curves.md").write_text("\n".join(table_lines(data)) + "\n")
    plot(data, folder / "curves.png")
    return data
