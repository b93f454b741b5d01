"""The four Cloud Functions of the visit counter; each is deployed with its own entry point."""
from common import log_instance_start
from get_counter import get_counter
from inc_counter import inc_counter
from serve_page import serve_page
from store_inc_counter import store_inc_counter

__all__ = ["get_counter", "inc_counter", "serve_page", "store_inc_counter"]

log_instance_start()
