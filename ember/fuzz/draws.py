"""Even draws from hypothesis: it favours small and extreme numbers (and shrinks towards 0), so `i % n` of a drawn
integer chose some kinds of case far more often than their share, and a drawn delay was mostly short."""

from __future__ import annotations

from hypothesis import strategies as st


def spread(i: int) -> int:
    """`i` scattered over 24 bits by Knuth's multiplicative hash; 0, where shrinking goes, stays 0."""
    return i * 2654435761 % 2**32 >> 8


def evenly(n: int) -> st.SearchStrategy[int]:
    """0 to n - 1, about evenly, shrinking towards 0."""
    return st.integers(0, 2**32 - 1).map(lambda i: spread(i) % n)
