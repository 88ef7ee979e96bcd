"""Serving the dashboard to others: what a server serves, who may do what on it, and its queue of jobs."""
