"""The toy's page."""

import streamlit as st


def render() -> None:
    st.title("Toy")
