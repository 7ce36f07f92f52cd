"""The toy's page."""

import streamlit as st


def render() -> None:
    st.title("Toy")


if __name__ == "__main__":
    render()
