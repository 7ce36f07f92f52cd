"""Mechanisms (hand raise, skip cache, jury, director, confidence) and the run store. No Streamlit here."""
