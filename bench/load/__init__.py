"""Load generation: the closed-loop ladder client, the open-loop replay engines (asyncio and Locust)
and the targets they drive."""
