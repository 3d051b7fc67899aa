"""The thread's budget selection (pure): which rounds fit, the gaps, paging."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from git_nerve.thread.select import EMPTY, Gap, Selection, select_before, select_default


def pairs(sizes: list[int], before: int | None = None):
    """(round, size) newest first, as the bus yields them; sizes[i] is round i + 1's size."""
    top = len(sizes) if before is None else min(before - 1, len(sizes))
    return ((r, sizes[r - 1]) for r in range(top, 0, -1))


def default(sizes: list[int], budget: int) -> Selection:
    return select_default(sizes[0] if sizes else None, pairs(sizes), budget)


def before(sizes: list[int], n: int, budget: int) -> Selection:
    return select_before(n, pairs(sizes, n), budget)


# -- default mode --------------------------------------------------------------------


def test_empty_thread_shows_nothing():
    assert default([], 100) == EMPTY
    assert before([], 1, 100) == EMPTY
    assert before([], 5, 100) == EMPTY


def test_thread_of_one_round_shows_it_alone():
    assert default([10], 100) == Selection((1,), ())
    assert default([10_000], 1) == Selection((1,), ())


def test_first_and_newest_round_are_shown_whatever_the_budget():
    sel = default([500, 10, 10, 10, 500], 1)
    assert sel.rounds == (1, 5)
    assert sel.omitted == (Gap(2, 4),)


def test_everything_that_fits_is_shown_without_a_hint():
    assert default([10] * 5, 1000) == Selection((1, 2, 3, 4, 5), ())


def test_round_one_counts_against_the_budget():
    # 10 (round 1) + 10 (round 10) + 10 (round 9) reaches 30: stop
    sel = default([10] * 10, 30)
    assert sel.rounds == (1, 9, 10)
    assert sel.omitted == (Gap(2, 8),)


def test_exact_fit_stops_at_the_budget_and_one_more_character_takes_one_more_round():
    assert default([10] * 10, 30).rounds == (1, 9, 10)
    assert default([10] * 10, 31).rounds == (1, 8, 9, 10)
    assert default([10] * 10, 29).rounds == (1, 9, 10)  # the round that reaches the budget is shown


def test_a_single_round_larger_than_the_budget():
    sizes = [10, 10, 10, 10, 10, 500]
    sel = default(sizes, 100)
    assert sel.rounds == (1, 6)
    assert sel.omitted == (Gap(2, 5),)
    # paging from its hint: the older small rounds fit, round 1 included
    assert before(sizes, 6, 100) == Selection((1, 2, 3, 4, 5), ())
    # the big round alone fills a page
    assert before(sizes, 7, 100) == Selection((6,), (Gap(1, 5),))


def test_gap_closes_when_the_tail_reaches_round_two():
    sel = default([10, 10, 10, 10], 30)
    assert sel.rounds == (1, 3, 4)
    assert sel.omitted == (Gap(2, 2),)
    assert sel.omitted[0].count == 1
    assert default([10, 10, 10, 10], 31) == Selection((1, 2, 3, 4), ())


def test_the_hint_loads_the_round_just_after_the_gap():
    gap = default([10] * 100, 50).omitted[0]
    assert gap.as_dict() == {"from": 2, "to": 96, "count": 95, "before": 97}


# -- --before mode -------------------------------------------------------------------


def test_before_goes_back_from_n_minus_one_and_leaves_a_hint_for_older_rounds():
    sel = before([10] * 20, 11, 30)
    assert sel.rounds == (8, 9, 10)
    assert sel.omitted == (Gap(1, 7),)


def test_before_exact_fit():
    assert before([10] * 20, 11, 30).rounds == (8, 9, 10)
    assert before([10] * 20, 11, 31).rounds == (7, 8, 9, 10)


def test_before_reaches_round_one_only_when_the_budget_allows():
    assert before([10] * 5, 4, 1000) == Selection((1, 2, 3), ())
    assert 1 not in before([10] * 5, 4, 20).rounds


def test_before_one_is_empty():
    assert before([10] * 5, 1, 100) == EMPTY


def test_before_two_is_round_one():
    assert before([10] * 5, 2, 1) == Selection((1,), ())


def test_before_beyond_the_end_starts_at_the_newest_round():
    sizes = [10] * 8
    assert before(sizes, 500, 25) == before(sizes, 9, 25) == Selection((6, 7, 8), (Gap(1, 5),))


def test_before_skips_pairs_that_are_not_older():
    # a caller that passes the whole thread still gets only the rounds before N
    sel = select_before(4, pairs([10] * 6), 1000)
    assert sel == Selection((1, 2, 3), ())


def test_zero_sized_rounds_do_not_stall():
    assert default([0] * 6, 1) == Selection((1, 2, 3, 4, 5, 6), ())
    assert before([0] * 6, 7, 1).rounds == (1, 2, 3, 4, 5, 6)


@pytest.mark.parametrize("budget", [0, -1, True, 2.5, "10"])
def test_a_budget_below_one_is_refused(budget):
    with pytest.raises(ValueError):
        default([1], budget)
    with pytest.raises(ValueError):
        before([1], 2, budget)


@pytest.mark.parametrize("n", [0, -3])
def test_before_below_one_is_refused(n):
    with pytest.raises(ValueError):
        select_before(n, iter(()), 10)


def test_the_walk_reads_only_what_the_budget_needs():
    read: list[int] = []

    def counted(sizes):
        for pair in pairs(sizes):
            read.append(pair[0])
            yield pair

    sizes = [10] * 100_000
    select_default(10, counted(sizes), 40)
    assert len(read) <= 5  # three tail rounds, plus the one that showed the budget was met
    read.clear()
    select_before(50_000, (p for p in counted(sizes) if p[0] < 50_000), 40)
    assert read[-1] >= 50_000 - 6


# -- paging: following every hint in turn ------------------------------------------


def follow(sizes: list[int], budget: int, first: Selection) -> list[Selection]:
    pages = [first]
    while pages[-1].omitted:
        (gap,) = pages[-1].omitted
        page = before(sizes, gap.before, budget)
        assert page.rounds, "a hint must never lead to an empty page"
        assert page.rounds[-1] == gap.last, "the page starts right where the gap ends"
        pages.append(page)
        assert len(pages) <= len(sizes) + 1
    return pages


def page_fits(sizes: list[int], rounds: tuple[int, ...], budget: int, *, base: int = 0, floor: int = 1) -> None:
    """Without its oldest round a page is below the budget; it stops short of ``floor`` only at the budget."""
    taken = [sizes[r - 1] for r in rounds]
    if len(rounds) > 1:
        assert base + sum(taken[1:]) < budget
    if rounds and rounds[0] > floor:
        assert base + sum(taken) >= budget


sizes_st = st.lists(st.integers(min_value=0, max_value=60), max_size=40)
budget_st = st.integers(min_value=1, max_value=200)


@settings(max_examples=300, deadline=None)
@given(sizes=sizes_st, budget=budget_st)
def test_paging_back_from_the_end_visits_every_round_exactly_once(sizes, budget):
    n = len(sizes)
    first = before(sizes, n + 1, budget)
    pages = follow(sizes, budget, first)
    seen = [r for page in pages for r in page.rounds]
    assert sorted(seen) == list(range(1, n + 1))
    assert len(seen) == len(set(seen))
    for page in pages:
        page_fits(sizes, page.rounds, budget)
        for gap in page.omitted:
            assert gap.count == gap.last - gap.first + 1 == page.rounds[0] - 1


@settings(max_examples=300, deadline=None)
@given(sizes=sizes_st, budget=budget_st)
def test_the_overview_and_its_hints_visit_every_round_once(sizes, budget):
    n = len(sizes)
    overview = default(sizes, budget)
    if n == 0:
        assert overview == EMPTY
        return
    assert overview.rounds[0] == 1 and overview.rounds[-1] == n
    tail = overview.rounds[1:]
    page_fits(sizes, tail, budget, base=sizes[0], floor=2)
    if overview.omitted:
        (gap,) = overview.omitted
        assert gap.first == 2 and gap.before == tail[0] and gap.count == tail[0] - 2
    else:
        assert overview.rounds == tuple(range(1, n + 1))
    pages = follow(sizes, budget, overview)
    later = [r for page in pages[1:] for r in page.rounds]
    # every omitted round exactly once; round 1 comes back only as the very last round read
    assert sorted(set(later) | set(overview.rounds)) == list(range(1, n + 1))
    assert len(later) == len(set(later))
    assert not set(later) & set(tail)
    if 1 in later:
        assert pages[-1].rounds[0] == 1
