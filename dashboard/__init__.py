"""Streamlit entry, the judgelab CLI, the background runner, components and chart builders."""
