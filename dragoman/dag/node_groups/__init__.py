"""What each group of Envoys receives: its listeners, virtual hosts and route tables, assembled
from the attached routes of its Gateways, with the indexes that rebuild one of them in place."""
