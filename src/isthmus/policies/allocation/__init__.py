"""Allocation policies: which queued job starts on which site."""
