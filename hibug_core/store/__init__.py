"""The project store: a folder with a SQL database for what people edit and arrays beside it."""
