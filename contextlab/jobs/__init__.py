"""The job wing: a run's lifecycle, the worker-side runners (a replay, a summary fetch, a
batch of a comparison or sweep) and the Celery tasks that call them, with the periodic
recovery Celery beat sends. Layered: tasks, then runners, then the lifecycle."""
