"""Bidirectional stream over a real WebSocket with the real model."""
import asyncio
import json

import websockets


def test_bidirectional_session(onnx_server):
    url = onnx_server.url.replace("http://", "ws://") + "/invocations-bidirectional-stream"

    async def session():
        frames = []
        async with websockets.connect(url, max_size=None) as ws:
            await ws.send(json.dumps({"type": "ping"}))
            assert json.loads(await ws.recv()) == {"type": "pong"}
            # SageMaker delivers client frames as binary; plain text frames work as well.
            await ws.send(json.dumps({"text": "Good morning.", "voice": "jf_alpha"}).encode())
            await ws.send(json.dumps({"text": "How are you today?", "speed": 1.2}))
            await ws.send(b"{broken")
            await ws.send(json.dumps({"text": "Goodbye."}).encode())
            await ws.send(json.dumps({"type": "close"}))
            async for msg in ws:
                frames.append(msg)
            return frames, ws.close_code

    frames, close_code = asyncio.run(asyncio.wait_for(session(), 120))
    assert close_code == 1000
    texts = [json.loads(f) for f in frames if isinstance(f, str)]
    assert [t["type"] for t in texts] == ["done", "done", "error", "done"]
    assert texts[2]["error"] == "invalid_json"
    assert [t["seq"] for t in texts] == [1, 2, 3, 4]
    # Each done follows that message's audio frames.
    audio_per_msg, cur = [], 0
    for f in frames:
        if isinstance(f, bytes):
            cur += len(f)
        else:
            audio_per_msg.append(cur)
            cur = 0
    assert audio_per_msg[0] > 0.5 * 48000 and audio_per_msg[1] > 0.5 * 48000 and audio_per_msg[3] > 0.3 * 48000
    assert audio_per_msg[2] == 0
    assert abs(texts[0]["audio_s"] - audio_per_msg[0] / 48000) < 0.01
    assert texts[0]["ttfab_ms"] > 0
