from inspector.screens.goto import GoToTurnScreen
from inspector.screens.help import HelpScreen
from inspector.screens.save import SaveScreen
from inspector.screens.search import SearchScreen

__all__ = ["GoToTurnScreen", "HelpScreen", "SaveScreen", "SearchScreen"]
