"""What Cloud Run bills a function for at a given request rate, by request-based billing: an instance is billed
from the start of its first request to the end of its last one in flight, each such period rounded up to
BILLING_ROUND_S, and a minimum instance at the idle rate the rest of the time.

A model, from Google's rules and queueing theory:
- Instances in use: Cloud Run keeps each instance near TARGET_UTILIZATION of what it can serve (of its
  concurrency and of its CPU), so at `rate` requests/s it runs ceil(rate / (TARGET_UTILIZATION x per instance)) of
  them, at least its min_instances (and one while there is traffic), at most its max_instances.
- Each instance is an M/M/k queue fed an equal share of the rate: k servers (its concurrency, or fewer when its
  vCPUs serve fewer requests at once than its concurrency allows), each serving one request per busy time. It is
  billed while not empty: 1 - P0 of the time, in busy periods that start rate x P0 times a second (an arrival that
  finds it empty) and last (1 - P0) / (rate x P0) s on average.
- A busy period taken as exponentially long is billed BILLING_ROUND_S x ceil(its length / BILLING_ROUND_S), on
  average BILLING_ROUND_S / (1 - exp(-BILLING_ROUND_S / mean)): BILLING_ROUND_S for a short one, its length plus
  half the rounding for a long one.
At the knee every instance is full (P0 = 0): billed all the time, the figure the model gave before it knew the
rate. Below it, an instance of concurrency 80 that serves one 20 ms request a second is billed 100 ms, not 0.25 ms.
"""
import math
from dataclasses import dataclass

# Cloud Run scales out to keep an instance at 60 % of its maximum concurrency and of its CPU, over a one-minute
# window (https://cloud.google.com/run/docs/about-instance-autoscaling).
TARGET_UTILIZATION = 0.6
# Billable instance time is rounded up to the nearest 100 ms (https://cloud.google.com/run/pricing).
BILLING_ROUND_S = 0.1


def empty_probability(servers: int, offered: float) -> float:
    """P0 of an M/M/k queue with `servers` servers and `offered` Erlangs (arrival rate x service time): the share
    of time it holds no request; 0 when saturated (offered >= servers). Computed in logs, so that an instance of
    concurrency 1,000 does not overflow a float."""
    if offered <= 0:
        return 1.0
    if offered >= servers:
        return 0.0
    log_terms = [j * math.log(offered) - math.lgamma(j + 1) for j in range(servers)]
    log_terms.append(servers * math.log(offered) - math.lgamma(servers + 1) - math.log(1 - offered / servers))
    top = max(log_terms)
    return math.exp(-top - math.log(sum(math.exp(term - top) for term in log_terms)))


def rounded_period_s(mean_s: float) -> float:
    """What one busy period of mean length `mean_s` (taken as exponential) is billed on average, rounded up to
    BILLING_ROUND_S."""
    return BILLING_ROUND_S / -math.expm1(-BILLING_ROUND_S / mean_s)


@dataclass(frozen=True)
class Occupancy:
    """One function at one request rate: instances in use and the instance-seconds billed per second."""
    instances: int
    busy_share: float  # of each instance's time, with a request in flight
    active_per_s: float  # instance-seconds billed at the active rate, per second
    idle_per_s: float  # minimum instances' idle instance-seconds, per second


def occupancy(rate: float, busy_s: float, per_instance_rps: float, concurrency: int, min_instances: int,
              max_instances: int) -> Occupancy:
    """The Occupancy of a function serving `rate` requests/s, each holding an instance `busy_s` seconds, an
    instance serving at most `per_instance_rps` (its concurrency's or its CPU's limit), between min_instances and
    max_instances of them. A rate above what max_instances serve bills the instance time it takes to serve it
    all (rate / per_instance_rps), since it is served later."""
    if rate <= 0:
        return Occupancy(min_instances, 0.0, 0.0, float(min_instances))
    wanted = math.ceil(rate / (TARGET_UTILIZATION * per_instance_rps) - 1e-9)
    instances = min(max_instances, max(1, min_instances, wanted))
    servers = max(1, min(concurrency, math.floor(per_instance_rps * busy_s + 1e-9)))
    share = rate / instances  # requests/s each instance gets
    p0 = empty_probability(servers, share * busy_s)
    if p0 == 0:
        billed = 1.0
    else:
        starts = share * p0
        billed = min(1.0, starts * rounded_period_s((1 - p0) / starts))
    # A rate beyond what the instances serve is served later (a push is redelivered) at their full rate: the work
    # is billed all the same.
    active = max(instances * billed, rate / per_instance_rps)
    return Occupancy(instances, 1 - p0, active, max(0.0, min_instances - active))
