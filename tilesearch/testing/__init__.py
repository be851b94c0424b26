"""Test helpers shipped with tilesearch: conformance suites for plugins and a synthetic runner."""
