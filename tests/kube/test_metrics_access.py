"""The /metrics gate against the real apiserver: made-up bearer tokens cost it a bounded number of
TokenReviews whatever their count, and a full answer cache drops its least recently used answer, not
all of them (a busy scraper is not sent back to the apiserver)."""
from __future__ import annotations

import pytest

from soperator.kube import Kube
from soperator.metrics.access import TokenGate

pytestmark = pytest.mark.kube


class CountingKube(Kube):
    """The operator's own client, counting the TokenReviews it sends (each still goes to the apiserver)."""

    reviews = 0

    def review_token(self, token: str):
        self.reviews += 1
        return super().review_token(token)


def test_made_up_tokens_cost_at_most_the_review_budget(api, namespace, service_account_token):
    kube = CountingKube(api)
    # A bucket that does not refill within the test: exactly `burst` reviews, then 429.
    gate = TokenGate(kube, reviews_per_second=0.001, burst=5)
    scraper = service_account_token(namespace, "scraper", may_read_metrics=True)
    assert gate.status_for(f"Bearer {scraper}") == 200
    answers = [gate.status_for(f"Bearer made-up-{i}") for i in range(100)]
    assert answers == [401] * 4 + [429] * 96
    assert kube.reviews == 5
    assert gate.status_for(f"Bearer {scraper}") == 200 and kube.reviews == 5  # cached, no review


def test_a_full_cache_drops_the_least_recently_used_answer(api, namespace, service_account_token):
    kube = CountingKube(api)
    gate = TokenGate(kube, entries=2)
    scraper = service_account_token(namespace, "scraper", may_read_metrics=True)
    stranger = service_account_token(namespace, "stranger")
    assert gate.status_for(f"Bearer {scraper}") == 200
    assert gate.status_for("Bearer made-up-a") == 401
    assert gate.status_for(f"Bearer {scraper}") == 200        # used again: now the most recent
    assert gate.status_for(f"Bearer {stranger}") == 403       # the cache is full: made-up-a goes
    assert gate.cached == 2 and kube.reviews == 3
    assert gate.status_for(f"Bearer {scraper}") == 200 and kube.reviews == 3
    assert gate.status_for("Bearer made-up-a") == 401 and kube.reviews == 4
