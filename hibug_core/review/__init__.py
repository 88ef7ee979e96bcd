"""Team review: a board of slice reviews with statuses and comments, saved views, and exported findings."""
