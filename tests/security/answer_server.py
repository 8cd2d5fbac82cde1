"""An HTTP server that answers each GET with the next line of a file the test controls.

Run on the test host as ``python3 answer_server.py ADDRESS PORT ANSWERS SERVED``: each
request takes the first line of ANSWERS (``exhausted`` when none is left), removes it and
appends it to SERVED, so a test can script what successive executions of one identical
probe see -- something outside the sandbox, not an input of the action -- and count how
many executions asked.
"""

import http.server
import sys
from pathlib import Path

ADDRESS, PORT, ANSWERS, SERVED = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]


class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        lines = ANSWERS.read_text().splitlines()
        answer = lines[0] if lines else "exhausted"
        ANSWERS.write_text("".join(line + "\n" for line in lines[1:]))
        with open(SERVED, "a") as served:
            served.write(answer + "\n")
        body = answer.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_):
        return


# One request at a time: the answers are taken in the order the executions ask.
http.server.HTTPServer((ADDRESS, PORT), Handler).serve_forever()
