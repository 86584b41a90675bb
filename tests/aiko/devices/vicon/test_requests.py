"""The Vicon SDK client's calls that ask for what the emulated Vicon does not serve: each gives the client the SDK's
"nothing" (None, 0), never made-up data, and the session goes on (docs/vicon.md, "Every request"). The unmodified
client (pyvicon-datastream) in this process, ``aiko emulate vicon`` in another."""

import pytest

from .processes import free_port, start_vicon, stop_vicon

pv = pytest.importorskip("pyvicon_datastream")
pytestmark = pytest.mark.timeout(60)

HOST = "127.0.0.62"


@pytest.fixture(scope="module")
def client():
    port = free_port(HOST)
    proc, _ = start_vicon(HOST, port, "--synthetic", "1", "--rate-hz", "100")
    c = pv.PyViconDatastream()
    assert c.connect(f"{HOST}:{port}") == pv.Result.Success
    c.enable_segment_data()
    c.enable_marker_data()
    c.enable_unlabeled_marker_data()
    c.set_stream_mode(pv.StreamMode.ServerPush)
    assert c.get_frame() == pv.Result.Success
    yield c
    c.disconnect()
    stop_vicon(proc)


REFUSED = {
    "get_subject_quality": lambda c: c.get_subject_quality("subject1") is None,  # quality is not sent
    "get_unlabeled_marker_count": lambda c: c.get_unlabeled_marker_count() == 0,  # every marker is labelled
    "get_unlabeled_marker_global_translation": lambda c: c.get_unlabeled_marker_global_translation(0) is None,
    "get_camera_count": lambda c: c.get_camera_count() == 0,  # no cameras are emulated
    "get_camera_name": lambda c: c.get_camera_name(0) is None,
}


@pytest.mark.parametrize("call", sorted(REFUSED))
def test_what_is_not_served_reads_as_nothing_and_the_next_frame_comes(client, call):
    assert REFUSED[call](client)
    number = client.get_frame_number()
    assert client.get_frame() == pv.Result.Success and client.get_frame_number() > number
    assert client.get_segment_global_translation("subject1", "seg1") is not None
