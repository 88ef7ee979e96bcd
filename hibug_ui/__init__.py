"""Streamlit helpers shared by the dashboard's pages: project state, cached data, widgets."""
