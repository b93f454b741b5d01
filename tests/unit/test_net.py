"""The network helpers: ports handed out once per process, and a probe that reads a server that
does not speak HTTP/1 as no answer."""
import socket
import threading

from visitkit import net


def test_a_port_is_never_handed_out_twice_even_while_nothing_binds_it():
    ports = [net.free_port() for _ in range(200)]  # none bound: the kernel could offer any again
    assert len(set(ports)) == len(ports)


def test_a_server_that_does_not_speak_http_1_is_no_answer():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()

        def answer_like_grpc():
            connection, _ = server.accept()
            with connection:
                connection.recv(1024)
                connection.sendall(b"\x00\x00\x12\x04\x00\x00\x00\x00\x00 not HTTP/1\r\n\r\n")

        threading.Thread(target=answer_like_grpc, daemon=True).start()
        assert net.http_status(f"http://127.0.0.1:{server.getsockname()[1]}/") is None
