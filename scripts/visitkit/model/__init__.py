"""The capacity and cost model: what an iteration's settings should carry and what it costs, and the Locust
fleet a rate of visits needs, from settings, profiles, list prices and benchmark records alone."""
